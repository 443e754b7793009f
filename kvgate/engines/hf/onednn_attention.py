"""Prefill attention as blocks of oneDNN matrix products (the `attention` option, "onednn").

torch's CPU `scaled_dot_product_attention` with `is_causal` (its flash-attention kernel) reaches about
60 GFLOP/s per core on this machine's AVX-512 EPYC at 1,011 prompt tokens (36 at 507), where oneDNN's
float32 matmul reaches ≈230 on the same shapes (bench/prefill_variants.py). This computes the same
attention, softmax(q·kᵀ · scale + mask)·v in float32, from two oneDNN products per block:

    queries [B, Hq, n, D] at key positions K−n…K−1, keys and values [B, Hkv, K, D], Hq = G·Hkv
    (grouped-query attention, Ainslie et al. 2023, arXiv:2305.13245; query head h reads key head
    h // G) → for each row b, key head h and block of m query positions [s, s+m), w = K−n+s+m:
        rows    [m·G, D]     the block's queries of h's G query heads, position-major, times scale
        scores  [m·G, w]   = rows · keys[b, h, :w]ᵀ              (oneDNN; later keys are all masked)
        scores[(i, g), j]  += the mask                           (None: −∞ for j > K−n+s+i, causal)
        weights [m·G, w]   = softmax(scores) along the keys       (float32, max subtracted)
        out[b, s:s+m, h·G:(h+1)·G] = weights · values[b, h, :w]  (oneDNN, values read transposed in place)
    → out [B, n, Hq, D], the layout transformers' attention functions return.

The mask is transformers' (its SDPA mask functions are registered with this): none for the causal
prefill of an empty cache, else bool [B or 1, 1, n, K] (a prefill chunk after cached entries: prefix
reuse, the question after a context eviction) or the additive per-head mask [B, Hq, n, K] of a
budgeted eviction (eviction.head_mask). It is applied as SDPA applies it: a bool mask's hidden
scores are −∞, a float mask is added, and a query whose scores are all −∞ gets 0. Only where the mask
shows some query a key after its own position, or leaves a query nothing, does a block read all K keys.

The G query heads of a key head share its keys in one product, so K and V are never repeated. A block
holds at most SCORE_ELEMENTS scores (m ≤ BLOCK_QUERIES, fewer for long prompts), so memory stays bounded
at any prompt length. The products are float32 with float32 accumulation (oneDNN's strict mode, torch's
float32 matmul precision "highest"); they sum in another order than the flash kernel, so outputs differ
from SDPA's in the last bits (≈1e-6 on unit-scale inputs, tests/engines/hf/test_onednn_attention.py).

Every prefill chunk of two or more queries takes this path, so every arm of a run computes its prompt
with one kernel. One query row (a decode step: SDPA's kernel is 2–4× faster there below ≈4K keys),
dropout, a mask of another shape or dtype, another dtype or device go to transformers' SDPA function
unchanged. Hooks on the attention module and its projections (query capture, the certificate, head
masks) see the same inputs.
"""

from __future__ import annotations

from typing import Any

import torch

NAME = "kvgate_onednn_masked"
"""The attention implementation's name in transformers' registries (config._attn_implementation; the
engine's fingerprint records it). Renamed when masked chunks left SDPA: a run made before with
attention=onednn computed them with SDPA, so resuming it on these kernels is refused."""
BLOCK_QUERIES = 128
"""Query positions per block (64, 128 and 192 alike at 507, 1,011 and 4,096 tokens; 256 10–35% slower)."""
SCORE_ELEMENTS = 1 << 22
"""Most scores a block holds (16 MiB of float32): blocks shrink beyond ≈10K tokens at G = 3."""


def available() -> bool:
    """Whether this torch build has oneDNN's float32 linear (the products' entry point)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


WIDE_VECTORS = ("AVX512",)
"""torch's CPU capabilities (`torch.backends.cpu.get_cpu_capability()`) on which these blocks beat SDPA's
flash kernel. On an AVX2-only CPU the kernel is the faster: on a 2-core AMD EPYC without AVX-512, a
prefill of 1,011 tokens took 5.02 CPU-s with SDPA against 5.42 with these blocks, one of 4,096 tokens
29.5 against 34.9 (medians of 5 alternated repetitions, projections packed; bench/control_vs_vllm.py:
the whole control 0.94×)."""


def default_attention(device: str, dtype: str, capability: str | None = None) -> str:
    """The hf engine's `attention` when none is given: "onednn" for float32 on a CPU with AVX-512
    (WIDE_VECTORS; `capability` defaults to torch's reading of this one) where torch has oneDNN, else
    "sdpa". A run records it in its fingerprint and resumes on it, whatever this machine's default."""
    if device != "cpu" or dtype != "float32" or not available():
        return "sdpa"
    found = capability if capability is not None else torch.backends.cpu.get_cpu_capability()
    return "onednn" if found in WIDE_VECTORS else "sdpa"


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
    """transformers' attention function signature: (out [B, n, Hq, D], None). A prefill chunk (n > 1)
    runs in blocks (attend_blocks), with its attention mask or, without one, causally; anything else is
    transformers' SDPA function's."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    n, kv = int(query.shape[2]), int(key.shape[2])
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    special = any(kwargs.get(k) is not None for k in ("position_bias", "cache", "s_aux", "softcap"))
    if (
        n == 1
        or (attention_mask is None and not causal)
        or (attention_mask is not None and not _broadcasts(attention_mask, query, kv))
        or dropout
        or special
        or kv < n
        or query.dtype != torch.float32
        or query.device.type != "cpu"
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal,
            **kwargs,
        )  # fmt: skip
    scale = scaling if scaling is not None else float(query.shape[-1]) ** -0.5
    if attention_mask is None:
        # Without a mask, keys beyond n are a static cache's empty slots (SDPA drops them too).
        return attend_blocks(query, key[:, :, :n], value[:, :, :n], scale), None
    return attend_blocks(query, key, value, scale, attention_mask), None


def attend_blocks(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    scale: float,
    mask: torch.Tensor | None = None,
    first: int = 0,
) -> torch.Tensor:
    """Attention of query [B, Hq, n, D] over key, value [B, Hkv, K, D] (Hq a multiple of Hkv, K ≥ n),
    float32 on CPU, in blocks of query positions as the module docstring spells out → [B, n, Hq, D].

    mask None: causal, K = n. Else mask [B or 1, Hq or 1, n, K], bool (True: seen) or additive (float),
    is applied as SDPA applies it, and nothing else is (query i is at key position K − n + i for the
    keys a causal mask shows). A block reads keys only up to its last query's position where the mask
    hides every key after it; a query that sees no key gets 0, as SDPA's (−∞ scores everywhere).

    first (causal only, a multiple of block_queries(G, K)): only queries first…n−1 are computed, by the
    very blocks, products and sums the whole computation runs for them → [B, n − first, Hq, D], equal bit
    for bit to the whole result's last n − first positions (the prefill's last layer: prefill_step)."""
    b, hq, n, d = query.shape
    hkv, kv = int(key.shape[1]), int(key.shape[2])
    g = hq // hkv
    if hq != g * hkv or kv < n or tuple(key.shape) != (b, hkv, kv, d) or value.shape != key.shape:
        raise ValueError(f"attention shapes: query {tuple(query.shape)}, key {tuple(key.shape)}, value "
                         f"{tuple(value.shape)}")  # fmt: skip
    if mask is None and kv != n:
        raise ValueError(f"causal attention without a mask needs as many keys as queries, got {kv} and {n}")
    block = block_queries(g, kv)
    if first and (mask is not None or not 0 < first < n or first % block):
        raise ValueError(f"first {first}: a block boundary (of {block}) inside {n} causal queries")
    linear = torch.ops.mkldnn._linear_pointwise
    key, value = _rows(key), _rows(value)
    r = n - first  # the queries computed
    rows = torch.empty((b, hkv, r, g, d), dtype=query.dtype)  # [b, h, position, group head, d]
    torch.mul(query[:, :, first:].unflatten(1, (hkv, g)).permute(0, 1, 3, 2, 4), scale, out=rows)
    out = torch.empty((b, r, hkv, g, d), dtype=query.dtype)
    offset = kv - n
    causal: torch.Tensor | None = None
    hidden: torch.Tensor | None = None
    unseen: torch.Tensor | None = None
    seen_after = False  # whether some query sees a key past its own position
    if mask is None:
        # [i, ·, j]: −∞ where j > i, else 0 (adding it is exact: x + 0 = x)
        causal = (
            torch.zeros((block, block), dtype=query.dtype)
            .masked_fill_(torch.ones((block, block), dtype=torch.bool).triu_(1), float("-inf"))
            .unsqueeze(1)
        )
    else:
        hidden = ~mask if mask.dtype == torch.bool else None  # masked_fill's operand, once
        seen = mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min
        seen_after = bool(seen.triu(offset + 1).any())
        unseen = ~seen.any(dim=-1)  # [B or 1, Hq or 1, n]: queries that see no key
        if bool(unseen.any()):
            seen_after = True  # SDPA spreads such a query's additive scores over every key: read them all
        else:
            unseen = None
    for start in range(first, n, block):
        stop = min(n, start + block)
        m = stop - start
        width = kv if seen_after else offset + stop
        for i in range(b):
            for h in range(hkv):
                chunk = rows[i, h, start - first : stop - first].view(m * g, d)
                scores = linear(chunk, key[i, h, :width], None, "none", [], "")
                grid = scores.view(m, g, width)
                if causal is not None:
                    grid[:, :, start:].add_(causal[:m, :, :m])
                elif hidden is not None:
                    grid.masked_fill_(_block(hidden, i, h, g, start, stop, width), float("-inf"))
                elif mask is not None:
                    grid.add_(_block(mask, i, h, g, start, stop, width))
                weights = torch.softmax(scores, dim=-1)
                attended = linear(weights, value[i, h, :width].t(), None, "none", [], "")
                out[i, start - first : stop - first, h] = attended.view(m, g, d)
    result = out.view(b, r, hq, d)
    if unseen is not None and mask is not None:  # SDPA gives 0 where every score is −∞ (softmax: 0/0)
        void = unseen if hidden is not None else ~(mask > float("-inf")).any(dim=-1)
        result.masked_fill_(void.expand(b, hq, n).transpose(1, 2).unsqueeze(-1), 0.0)
    return result


def block_queries(groups: int, keys: int) -> int:
    """Query positions per block of attend_blocks, for `groups` query heads per key head over `keys`."""
    return max(1, min(BLOCK_QUERIES, SCORE_ELEMENTS // (groups * keys)))


def _broadcasts(mask: torch.Tensor, query: torch.Tensor, kv: int) -> bool:
    """Whether mask is one attend_blocks applies: [B or 1, Hq or 1, n, K], bool or the query's dtype."""
    b, hq, n, _ = query.shape
    return (
        mask.dim() == 4
        and mask.shape[0] in (1, b)
        and mask.shape[1] in (1, hq)
        and tuple(mask.shape[2:]) == (n, kv)
        and mask.dtype in (torch.bool, query.dtype)
        and mask.device == query.device
    )


def _block(mask: torch.Tensor, i: int, h: int, g: int, start: int, stop: int, width: int) -> torch.Tensor:
    """mask's entries for row i, key head h's g query heads, queries [start, stop) and the first width
    keys, laid out as a block's scores [m, g (or 1), width]."""
    row = mask[i if mask.shape[0] > 1 else 0]
    if row.shape[0] == 1:
        return row[0, start:stop, :width].unsqueeze(1)
    return row[h * g : (h + 1) * g, start:stop, :width].transpose(0, 1)


def _rows(x: torch.Tensor) -> torch.Tensor:
    """x [B, H, n, D] with each head's positions as dense rows (oneDNN reads a [n, D] slice, or its
    transpose, in place; other strides would take its slow path)."""
    return x if x.stride(-1) == 1 and x.stride(-2) == x.shape[-1] else x.contiguous()
