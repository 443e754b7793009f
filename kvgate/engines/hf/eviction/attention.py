"""Attention of captured queries over cached keys, the one computation SnapKV, H2O and TOVA share.

Shapes: queries [B, Hq, m, D] are the rotated queries of m consecutive positions `first … first + m − 1`
of the span; keys [B, Hkv, n, D] are the span's cached (rotated) keys; Hq = Hkv · G for grouped-query
attention, and query head h reads key head h // G, so viewing the queries as [B, Hkv, G, m, D] puts
each group under its key head. The logits are q·kᵀ/√D, as in Llama-family attention; a query at
position p sees keys 0 … p only (causal mask).
"""

from __future__ import annotations

import math

import torch


def grouped_attention(queries: torch.Tensor, keys: torch.Tensor, first: int) -> torch.Tensor:
    """softmax(q·kᵀ/√D, causal) in float32: queries [B, Hq, m, D], keys [B, Hkv, n, D] → [B, Hkv, G, m, e].

    `first` is the position of the first query among the n keys. Keys after the last query get no
    attention, so they are left out: e = first + m ≤ n columns, for keys 0 … e − 1 (e = n when the
    queries run to the end of the span). Only the last m × m block needs the causal mask.
    """
    b, hq, m, d = queries.shape
    hkv, n = keys.shape[1], keys.shape[2]
    if hq % hkv:
        raise ValueError(f"query heads ({hq}) must be a multiple of key heads ({hkv})")
    if first < 0 or first + m > n:
        raise ValueError(f"queries at positions {first}…{first + m - 1} fall outside the {n} keys")
    grouped = queries.float().reshape(b, hkv, hq // hkv, m, d) / math.sqrt(d)
    seen = keys[:, :, : first + m].float().unsqueeze(2)  # [B, Hkv, 1, e, D]
    logits = torch.matmul(grouped, seen.transpose(-1, -2))  # [B, Hkv, G, m, e]
    future = torch.ones(m, m, dtype=torch.bool, device=keys.device).triu(diagonal=1)
    logits[..., first:].masked_fill_(future, float("-inf"))
    return torch.softmax(logits, dim=-1)


def protect_recent(scores: torch.Tensor, count: int) -> torch.Tensor:
    """scores [B, H, n] with the last `count` positions raised above every other score.

    The raised value is finite (max + 1), not +inf, so when fewer entries are kept than are protected
    `keep_indices` still breaks the tie towards the most recent ones, deterministically.
    """
    if count <= 0 or scores.shape[-1] == 0:
        return scores
    raised = scores.clone()
    raised[..., -count:] = scores.max() + 1.0
    return raised
