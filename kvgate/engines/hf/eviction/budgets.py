"""Eviction budgets that differ by head or by layer: how many entries each KV head of each layer keeps.

A uniform method keeps the same k of n entries in every head and layer. AdaKV (Feng et al., 2024,
"Ada-KV: Optimizing KV Cache Eviction by Adaptive Budget Allocation", arXiv:2407.11550) keeps, per layer,
the top Hkv·k scores over all heads together, so heads share the layer's budget unevenly; PyramidKV (Cai
et al., 2024, "PyramidKV: Dynamic KV Cache Compression based on Pyramidal Information Funneling",
arXiv:2406.02069) gives lower layers more and higher layers less, k on average. Both follow the budget
rules kvpress publishes (its AdaKVPress and PyramidKVPress docstrings and formulas).

Shapes: scores [B, Hkv, n] (higher keeps), counts [B, Hkv] (entries each head keeps).
"""

from __future__ import annotations

import torch


def descending_order(scores: torch.Tensor, convention: str = "kvgate") -> torch.Tensor:
    """[..., m] → indices of `scores` from highest to lowest along the last dim; ties go to later
    positions (kvgate) or earlier ones (kvpress), as `base.keep_indices` breaks them."""
    if convention == "kvpress":
        return torch.sort(scores, dim=-1, descending=True, stable=True).indices
    m = scores.shape[-1]
    return m - 1 - torch.sort(scores.flip(-1), dim=-1, descending=True, stable=True).indices


def ranks(scores: torch.Tensor, convention: str = "kvgate") -> torch.Tensor:
    """[..., m] → each entry's rank by score along the last dim (0 the highest)."""
    order = descending_order(scores, convention)
    rank = torch.empty_like(order)
    positions = torch.arange(scores.shape[-1], device=scores.device).expand_as(order)
    return rank.scatter_(-1, order, positions)


def adaptive_head_counts(
    scores: torch.Tensor, keep: int, safeguard: float, convention: str = "kvgate"
) -> torch.Tensor:
    """AdaKV's split of a layer's budget Hkv·`keep` among its heads: each head's top ⌊keep·safeguard⌋
    entries first (the safeguard), then the layer's highest remaining scores, whichever head holds them.
    Returns counts [B, Hkv], summing to Hkv·keep per row."""
    b, h, n = scores.shape
    floor = int(keep * safeguard)
    raised = scores.float().clone()
    if floor > 0:
        raised = torch.where(ranks(scores, convention) < floor, torch.finfo(torch.float32).max, raised)
    chosen = descending_order(raised.reshape(b, h * n), convention)[:, : h * keep]
    return (
        torch.zeros(b, h * n, dtype=torch.long, device=scores.device)
        .scatter_(1, chosen, 1)
        .reshape(b, h, n)
        .sum(dim=-1)
    )


def pyramid_layer_budget(n: int, ratio: float, layer: int, layers: int, window: int, beta: float) -> int:
    """PyramidKV's entries kept in `layer` of `layers` for a span of n: budgets falling linearly from
    the bottom layer to the top, averaging n·(1 − ratio), the top one at least the `window` (whose
    entries SnapKV always keeps); `beta` sets how steep (the top layer keeps about 1/beta of the
    average beyond the window). Where no such pyramid fits, every layer keeps round(n·(1 − ratio))."""
    if beta < 1:
        raise ValueError(f"beta must be ≥ 1, got {beta}")
    average = n * (1 - ratio)
    low = average / beta
    high = 2 * average - low
    if high >= n - window:
        high = n - window
        low = 2 * average - high
    if layers < 2 or not n >= high >= low >= window:
        return round(average)
    step = (high - low) / (layers - 1)
    return round(high - layer * step)
