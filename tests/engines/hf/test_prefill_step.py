"""The flat prefill (prefill_step) equals the modules' forward bit for bit on the embedded model, logits
and every cache entry, at lengths whose last attention block holds one, two or many positions and on two
rows, with attention oneDNN's blocks and SDPA's alike; attend_blocks with `first` gives the whole
result's last rows exactly; and a hook, eager attention, unpacked projections or cached entries send the
prompt through the modules."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kvgate.engines.hf import onednn_attention, prefill_step
from kvgate.engines.hf.onednn_attention import attend_blocks
from kvgate.engines.hf.onednn_linear import is_packed
from kvgate.engines.hf.preallocated_cache import preallocated_cache

pytestmark = pytest.mark.skipif(not onednn_attention.available(), reason="torch built without oneDNN")


def _modules_prefill(model: Any, ids: torch.Tensor, cache: Any) -> torch.Tensor:
    positions = torch.arange(ids.shape[1]).unsqueeze(0)
    out = model(
        input_ids=ids, past_key_values=cache, position_ids=positions, use_cache=True, logits_to_keep=1
    )
    logits: torch.Tensor = out.logits
    return logits


@pytest.fixture(scope="module")
def onednn_model(engine: Any) -> Any:
    """The shared engine's model with attention=onednn (the AVX-512 default) for this module's tests."""
    model = engine.model
    was = model.config._attn_implementation
    model.set_attn_implementation(onednn_attention.register())
    yield model
    model.set_attn_implementation(was)


@pytest.fixture(params=["onednn", "sdpa"])
def attention(request: pytest.FixtureRequest, onednn_model: Any) -> Any:
    """The model with the attention under test: oneDNN's blocks, or SDPA's (the default without AVX-512)."""
    if request.param == "sdpa":
        onednn_model.set_attn_implementation("sdpa")
    yield request.param
    onednn_model.set_attn_implementation(onednn_attention.register())


@pytest.mark.parametrize(("rows", "n"), [(1, 2), (1, 3), (1, 129), (1, 130), (1, 300), (2, 258), (1, 1011)])
def test_the_flat_prefill_is_the_modules_forward_bit_for_bit(
    onednn_model: Any, attention: str, rows: int, n: int
) -> None:
    model = onednn_model
    assert (model.config._attn_implementation == "sdpa") == (attention == "sdpa")
    if not is_packed(model.model.layers[0].mlp.down_proj):
        pytest.skip("the shared engine's projections are not oneDNN's packed ones")
    prompt = torch.randint(0, model.config.vocab_size, (rows, n), generator=torch.Generator().manual_seed(n))
    with torch.inference_mode():
        flat, modules = (preallocated_cache(model.config, n + 1) for _ in range(2))
        assert prefill_step.applies(model, prompt, flat, 0)
        a = prefill_step.prefill(model, prompt, flat)
        b = _modules_prefill(model, prompt, modules)
    assert a.shape == b.shape == (rows, 1, model.config.vocab_size)
    assert torch.equal(a, b), f"logits differ by {(a - b).abs().max().item():.3g}"
    for x, y in zip(flat.layers, modules.layers, strict=True):
        assert x.keys.shape[2] == n and torch.equal(x.keys, y.keys) and torch.equal(x.values, y.values)


@pytest.mark.parametrize(("n", "first"), [(300, 128), (300, 256), (257, 256), (129, 128)])
def test_attention_from_a_block_boundary_is_the_whole_results_tail(n: int, first: int) -> None:
    generator = torch.Generator().manual_seed(n)
    query = torch.randn(1, n, 9, 64, generator=generator).transpose(1, 2)
    key, value = torch.randn(1, 3, n, 64, generator=generator), torch.randn(1, 3, n, 64, generator=generator)
    whole = attend_blocks(query, key, value, 0.125)
    tail = attend_blocks(query, key, value, 0.125, first=first)
    assert tail.shape == (1, n - first, 9, 64) and torch.equal(tail, whole[:, first:])


@pytest.mark.parametrize("first", [100, -128, 384])
def test_a_first_row_off_the_block_boundaries_is_refused(first: int) -> None:
    query = torch.randn(1, 9, 300, 64)
    key = value = torch.randn(1, 3, 300, 64)
    with pytest.raises(ValueError, match="block boundary"):
        attend_blocks(query, key, value, 0.125, first=first)


def test_what_the_flat_prefill_cannot_match_goes_through_the_modules(
    onednn_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = onednn_model
    if not is_packed(model.model.layers[0].mlp.down_proj):
        pytest.skip("the shared engine's projections are not oneDNN's packed ones")
    prompt = torch.tensor([[1, 2, 3, 4]])
    empty = preallocated_cache(model.config, 8)
    assert prefill_step.applies(model, prompt, empty, 0)
    assert not prefill_step.applies(model, prompt[:, :1], empty, 0)  # a decode step's shape
    assert not prefill_step.applies(model, prompt, empty, 4)  # positions after cached entries
    with torch.inference_mode():
        cached = preallocated_cache(model.config, 8)
        prefill_step.prefill(model, prompt, cached)
    assert not prefill_step.applies(model, prompt, cached, 0)
    handle = model.model.layers[29].self_attn.q_proj.register_forward_hook(lambda *_: None)
    try:
        assert not prefill_step.applies(model, prompt, empty, 0)
    finally:
        handle.remove()
    model.set_attn_implementation("sdpa")
    try:
        assert prefill_step.applies(model, prompt, empty, 0)
        model.set_attn_implementation("eager")
        assert not prefill_step.applies(model, prompt, empty, 0)
    finally:
        model.set_attn_implementation(onednn_attention.register())
    assert prefill_step.applies(model, prompt, empty, 0)
    torch_linear = model.model.layers[7].mlp.up_proj
    monkeypatch.setattr(prefill_step, "is_packed", lambda module: module is not torch_linear)
    assert not prefill_step.applies(model, prompt, empty, 0)  # one projection torch's nn.Linear


@pytest.mark.parametrize(
    ("n", "block", "start"), [(2, 1, 0), (3, 1, 1), (1011, 1, 1009), (130, 128, 128), (129, 128, 0)]
)
def test_the_last_layers_tail_holds_the_last_two_positions(n: int, block: int, start: int) -> None:
    assert prefill_step.tail_start(n, block) == start
    assert start % block == 0 and n - start >= 2
