"""The flat decode step (decode_step) equals the modules' step bit for bit on the embedded model: logits
and appended cache entries, one row or several, on a full cache and on one shortened by eviction (true
positions past the cache's length), on the engine's default kernels; F.rms_norm equals
transformers' RMSNorm; and a hook on any module sends the step through the modules, where it fires."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kvgate.engines.hf.decode_step import applies, decode_step
from kvgate.engines.hf.forward import forward_at
from kvgate.engines.hf.preallocated_cache import preallocated_cache


def _modules_step(model: Any, ids: torch.Tensor, cache: Any, position: int) -> torch.Tensor:
    """The step through transformers' modules (what forward_at ran before the flat step)."""
    positions = torch.tensor([[position]])
    out = model(
        input_ids=ids, past_key_values=cache, position_ids=positions, use_cache=True, logits_to_keep=1
    )
    logits: torch.Tensor = out.logits
    return logits


def _prefilled(model: Any, ids: torch.Tensor, capacity: int) -> Any:
    cache = preallocated_cache(model.config, capacity)
    forward_at(model, ids, cache, 0)
    return cache


@pytest.mark.parametrize(("rows", "evicted"), [(1, False), (2, False), (1, True)])
def test_the_flat_step_is_the_modules_step_bit_for_bit(engine: Any, rows: int, evicted: bool) -> None:
    model = engine.model
    generator = torch.Generator().manual_seed(rows)
    prompt = torch.randint(0, model.config.vocab_size, (rows, 90), generator=generator)
    with torch.inference_mode():
        flat, modules = (_prefilled(model, prompt, 100) for _ in range(2))
        if evicted:  # keep every other entry: positions run on past the cache's length
            for cache in (flat, modules):
                for layer in cache.layers:
                    layer.keys, layer.values = layer.keys[:, :, ::2], layer.values[:, :, ::2]
        token = prompt[:, -1:]
        assert applies(model, token)
        for step in range(6):
            a = decode_step(model, token, flat, 90 + step)
            b = _modules_step(model, token, modules, 90 + step)
            assert a.shape == b.shape == (rows, 1, model.config.vocab_size)
            assert torch.equal(a, b), f"step {step}: logits differ by {(a - b).abs().max().item():.3g}"
            token = b[:, -1].argmax(-1, keepdim=True)
        for x, y in zip(flat.layers, modules.layers, strict=True):
            assert torch.equal(x.keys, y.keys) and torch.equal(x.values, y.values)


def test_rms_norm_is_transformers_rms_norm() -> None:
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    from kvgate.engines.hf.decode_step import _rms_norm

    generator = torch.Generator().manual_seed(0)
    for width, scale in ((576, 1.0), (576, 40.0), (64, 1e-3), (1536, 3.0)):
        norm = LlamaRMSNorm(width, eps=1e-5)
        with torch.no_grad():
            norm.weight.copy_(torch.randn(width, generator=generator))
        x = torch.randn(3, 1, width, generator=generator) * scale
        with torch.inference_mode():
            assert torch.equal(_rms_norm(norm, x), norm(x))


def test_a_hook_sends_the_step_through_the_modules(engine: Any) -> None:
    model = engine.model
    token = torch.tensor([[42]])
    with torch.inference_mode():
        cache = _prefilled(model, torch.tensor([[1, 2, 3]]), 8)
    seen: list[tuple[int, ...]] = []
    handle = model.model.layers[3].self_attn.q_proj.register_forward_hook(
        lambda module, args, out: seen.append(tuple(out.shape))
    )
    try:
        assert not applies(model, token)
        with torch.inference_mode():
            forward_at(model, token, cache, 3)
    finally:
        handle.remove()
    assert seen == [(1, 1, model.config.num_attention_heads * model.model.layers[3].self_attn.head_dim)]
    assert applies(model, token) and not applies(model, torch.tensor([[1, 2]]))
