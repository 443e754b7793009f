"""Causal prefill attention as blocks of oneDNN matrix products (the `attention` option, "onednn").

torch's CPU `scaled_dot_product_attention` with `is_causal` (its flash-attention kernel) reaches about
60 GFLOP/s per core on this machine's AVX-512 EPYC at 1,011 prompt tokens (36 at 507), where oneDNN's
float32 matmul reaches ≈230 on the same shapes (bench/prefill_variants.py). This computes the same
attention, softmax(q·kᵀ · scale + causal mask)·v in float32, from two oneDNN products per block:

    queries [B, Hq, n, D], keys and values [B, Hkv, n, D], Hq = G·Hkv (grouped-query attention,
    Ainslie et al. 2023, arXiv:2305.13245; query head h reads key head h // G) →
    for each row b, key head h and block of m query positions [s, s+m):
        rows    [m·G, D]     the block's queries of h's G query heads, position-major, times scale
        scores  [m·G, s+m] = rows · keys[b, h, :s+m]ᵀ          (oneDNN; keys past s+m are all masked)
        scores[(i, g), j] += −∞ for j > s+i                     (the causal mask, on the last m columns)
        weights [m·G, s+m] = softmax(scores) along the keys     (float32, max subtracted)
        out[b, s:s+m, h·G:(h+1)·G] = weights · values[b, h, :s+m]  (oneDNN, values read transposed in place)
    → out [B, n, Hq, D], the layout transformers' attention functions return.

The G query heads of a key head share its keys in one product, so K and V are never repeated. A block
holds at most SCORE_ELEMENTS scores (m ≤ BLOCK_QUERIES, fewer for long prompts), so memory stays bounded
at any prompt length; the causal half of the work is skipped except inside each block's last m columns.
The products are float32 with float32 accumulation (oneDNN's strict mode, torch's float32 matmul
precision "highest"); they sum in another order than the flash kernel, so outputs differ from SDPA's in
the last bits (≈1e-6 on unit-scale inputs, tests/engines/hf/test_onednn_attention.py).

Only the causal prefill of a cache that held nothing (no attention mask; the mask functions are SDPA's,
so transformers passes none exactly when SDPA would use `is_causal`) takes this path; one query row (a
decode step), any explicit mask (prefix reuse, a question after eviction, a budgeted eviction's per-head
mask), dropout or another dtype or device goes to transformers' SDPA function unchanged. Hooks on the
attention module and its projections (query capture, the certificate, head masks) see the same inputs.
"""

from __future__ import annotations

from typing import Any

import torch

NAME = "kvgate_onednn"
"""The attention implementation's name in transformers' registries (config._attn_implementation)."""
BLOCK_QUERIES = 128
"""Query positions per block (64, 128 and 192 alike at 507, 1,011 and 4,096 tokens; 256 10–35% slower)."""
SCORE_ELEMENTS = 1 << 22
"""Most scores a block holds (16 MiB of float32): blocks shrink beyond ≈10K tokens at G = 3."""


def available() -> bool:
    """Whether this torch build has oneDNN's float32 linear (the products' entry point)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def register() -> str:
    """Register the function (and SDPA's mask functions) under NAME with transformers; returns NAME."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME


def attention_forward(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention function signature: (out [B, n, Hq, D], None). The causal prefill of an
    empty cache runs in blocks (causal_blocks); anything else is transformers' SDPA function's."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    n = int(query.shape[2])
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    special = any(kwargs.get(k) is not None for k in ("position_bias", "cache", "s_aux", "softcap"))
    if (
        attention_mask is not None
        or n == 1
        or not causal
        or dropout
        or special
        or key.shape[2] < n
        or query.dtype != torch.float32
        or query.device.type != "cpu"
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal,
            **kwargs,
        )  # fmt: skip
    scale = scaling if scaling is not None else float(query.shape[-1]) ** -0.5
    # Without a mask, keys beyond n are a static cache's empty slots (SDPA drops them too).
    return causal_blocks(query, key[:, :, :n], value[:, :, :n], scale), None


def causal_blocks(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal attention of query [B, Hq, n, D] over key, value [B, Hkv, n, D] (Hq a multiple of Hkv),
    float32 on CPU, in blocks of query positions as the module docstring spells out → [B, n, Hq, D]."""
    b, hq, n, d = query.shape
    hkv = int(key.shape[1])
    g = hq // hkv
    if hq != g * hkv or tuple(key.shape) != (b, hkv, n, d) or value.shape != key.shape:
        raise ValueError(f"attention shapes: query {tuple(query.shape)}, key {tuple(key.shape)}, value "
                         f"{tuple(value.shape)}")  # fmt: skip
    linear = torch.ops.mkldnn._linear_pointwise
    key, value = _rows(key), _rows(value)
    rows = torch.empty((b, hkv, n, g, d), dtype=query.dtype)  # [b, h, position, group head, d]
    torch.mul(query.view(b, hkv, g, n, d).permute(0, 1, 3, 2, 4), scale, out=rows)
    out = torch.empty((b, n, hkv, g, d), dtype=query.dtype)
    block = max(1, min(BLOCK_QUERIES, SCORE_ELEMENTS // (g * n)))
    # [i, ·, j]: −∞ where j > i, else 0 (adding it is exact: x + 0 = x)
    causal = (
        torch.zeros((block, block), dtype=query.dtype)
        .masked_fill_(torch.ones((block, block), dtype=torch.bool).triu_(1), float("-inf"))
        .unsqueeze(1)
    )
    for start in range(0, n, block):
        stop = min(n, start + block)
        m = stop - start
        for i in range(b):
            for h in range(hkv):
                scores = linear(rows[i, h, start:stop].view(m * g, d), key[i, h, :stop], None, "none", [], "")
                scores.view(m, g, stop)[:, :, start:].add_(causal[:m, :, :m])
                weights = torch.softmax(scores, dim=-1)
                attended = linear(weights, value[i, h, :stop].t(), None, "none", [], "")
                out[i, start:stop, h] = attended.view(m, g, d)
    return out.view(b, n, hq, d)


def _rows(x: torch.Tensor) -> torch.Tensor:
    """x [B, H, n, D] with each head's positions as dense rows (oneDNN reads a [n, D] slice, or its
    transpose, in place; other strides would take its slow path)."""
    return x if x.stride(-1) == 1 and x.stride(-2) == x.shape[-1] else x.contiguous()
