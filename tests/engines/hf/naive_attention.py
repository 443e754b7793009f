"""Reference attention written as plain loops, to check the vectorised scorers against.

Shapes as in kvgate.engines.hf.eviction.attention: queries [B, Hq, n, D], keys [B, Hkv, n, D].
"""

from __future__ import annotations

import math

import torch


def attention_row(queries: torch.Tensor, keys: torch.Tensor, b: int, head: int, p: int) -> list[float]:
    """Attention of query head `head` at position p over all n keys (0 for keys after p)."""
    group = queries.shape[1] // keys.shape[1]
    kv_head, n, d = head // group, keys.shape[2], keys.shape[3]
    logits = []
    for j in range(p + 1):
        dot = sum(float(queries[b, head, p, i]) * float(keys[b, kv_head, j, i]) for i in range(d))
        logits.append(dot / math.sqrt(d))
    top = max(logits)
    weights = [math.exp(value - top) for value in logits]
    total = sum(weights)
    return [w / total for w in weights] + [0.0] * (n - p - 1)


def received(queries: torch.Tensor, keys: torch.Tensor, positions: list[int], reduce: str) -> torch.Tensor:
    """[B, Hkv, n]: attention each key receives from the queries at `positions`, averaged over each
    group's query heads, then averaged ("mean") or summed ("sum") over the positions."""
    batch, hq = queries.shape[:2]
    hkv, n = keys.shape[1], keys.shape[2]
    group = hq // hkv
    out = torch.zeros(batch, hkv, n, dtype=torch.float64)
    for b in range(batch):
        for kv_head in range(hkv):
            for head in range(kv_head * group, (kv_head + 1) * group):
                for p in positions:
                    row = attention_row(queries, keys, b, head, p)
                    for j in range(n):
                        out[b, kv_head, j] += row[j] / group
    return out / len(positions) if reduce == "mean" else out


def pool(values: list[float], kernel: int, how: str) -> list[float]:
    """Stride-1 pooling that keeps the length: zero padding for "avg" (divide by kernel), none for "max"."""
    half, out = kernel // 2, []
    for i in range(len(values)):
        window = [values[j] for j in range(i - half, i + half + 1) if 0 <= j < len(values)]
        out.append(sum(window) / kernel if how == "avg" else max(window))
    return out
