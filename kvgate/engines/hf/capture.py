"""Record each layer's rotated queries during prefill, for eviction methods that look at attention.

transformers caches keys and values but never queries. Inside `capture_queries(model)` a forward
pre-hook on every `self_attn` recomputes them from the same inputs the attention receives:
q = RoPE(q_norm?(q_proj(hidden_states))) with the layer's `position_embeddings` (cos, sin), exactly as
Llama-family attention does before q·kᵀ. Only the query projection is repeated; the forward itself is
untouched, so the outputs are bit-identical to a run without the hooks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import partial
from typing import Any

import torch


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[..., D] → [..., D]: (x₁, x₂) ↦ (−x₂, x₁) on the two halves of the last dim."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding (Su et al., 2021, arXiv:2104.09864): x [B, H, n, D], cos and sin [B, n, D]."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return x * cos + rotate_half(x) * sin


def attention_modules(model: Any) -> list[Any]:
    """The `self_attn` module of every decoder layer, in layer order; ValueError if not Llama-like."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        raise ValueError(
            f"{type(model).__name__} has no model.layers: query capture needs a Llama-family model"
        )
    modules = [getattr(layer, "self_attn", None) for layer in layers]
    for module in modules:
        if module is None or not hasattr(module, "q_proj") or not hasattr(module, "head_dim"):
            name = type(model).__name__
            raise ValueError(f"{name}: query capture needs self_attn with q_proj and head_dim in every layer")
    return modules


def _record(
    captured: dict[int, torch.Tensor],
    index: int,
    heads: int,
    last: int | None,
    module: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
    embeddings = kwargs.get("position_embeddings", args[1] if len(args) > 1 else None)
    if embeddings is None:
        raise RuntimeError(f"layer {index}: attention was called without position_embeddings")
    cos, sin = embeddings
    if last is not None:
        hidden, cos, sin = hidden[:, -last:], cos[:, -last:], sin[:, -last:]
    if cos.shape[-1] != module.head_dim:
        raise RuntimeError(f"layer {index}: partial rotary embeddings are not supported by query capture")
    b, n, _ = hidden.shape
    queries = module.q_proj(hidden).view(b, n, heads, module.head_dim)
    q_norm = getattr(module, "q_norm", None)
    if q_norm is not None:
        queries = q_norm(queries)
    rotated = apply_rope(queries.transpose(1, 2), cos, sin).detach()
    previous = captured.get(index)
    captured[index] = rotated if previous is None else torch.cat([previous, rotated], dim=2)


@contextlib.contextmanager
def capture_queries(model: Any, last: int | None = None) -> Iterator[dict[int, torch.Tensor]]:
    """Yield {layer index: rotated queries [B, Hq, n, D]}, filled by the forward passes run inside; with
    `last`, only those of each forward's last `last` positions ([B, Hq, min(last, n), D]).

    Meant for one forward (the prefill); a second forward inside appends its positions along n, as a
    chunked prefill would. The hooks are removed on exit, also on error.
    """
    modules = attention_modules(model)
    heads = int(model.config.num_attention_heads)
    captured: dict[int, torch.Tensor] = {}
    handles = []
    try:
        for index, module in enumerate(modules):
            hook = partial(_record, captured, index, heads, last)
            handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
        yield captured
    finally:
        for handle in handles:
            handle.remove()
