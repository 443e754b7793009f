"""H2O: keep the heavy hitters, the keys that accumulated the most attention, plus the recent ones.

Zhang et al., 2023, "H2O: Heavy-Hitter Oracle for Efficient Generative Inference of Large Language
Models" (arXiv:2306.14048).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvgate.engines.hf.eviction.attention import grouped_attention, protect_recent
from kvgate.engines.hf.eviction.base import ScoringInputs, check_ratio


@dataclass(frozen=True)
class H2O:
    """Score = attention each key receives, summed over all n prompt queries (causal).

    Queries [B, Hq, n, D] are taken `chunk` at a time ([B, Hkv, G, chunk, ≤ n] probabilities: a chunk
    ending at position e only sees keys 0 … e − 1), so memory stays O(chunk · n) for long prompts; the
    sum over queries is averaged over the G query heads of each group → [B, Hkv, n]. `chunk` changes
    memory and speed only (scores agree to float rounding).

    The paper splits the budget between heavy hitters and the most recent tokens; here the last
    `recent` entries (default 32, the spec's `window`, like SnapKV's observation window) are always
    kept and the rest of the budget goes to the heaviest hitters. No attention sinks: early tokens
    already collect the most attention under a causal sum.
    """

    ratio: float = 0.5
    recent: int = 32
    chunk: int = 256

    def __post_init__(self) -> None:
        check_ratio(self.ratio)
        if self.recent < 0:
            raise ValueError(f"recent must be ≥ 0, got {self.recent}")
        if self.chunk < 1:
            raise ValueError(f"chunk must be ≥ 1, got {self.chunk}")

    def scores(self, inputs: ScoringInputs) -> torch.Tensor:
        n, queries = inputs.n, inputs.queries
        if queries.shape[2] != n:
            raise ValueError(f"H2O needs the queries of all {n} positions, got {queries.shape[2]}")
        keys = inputs.keys.float()
        total = torch.zeros(keys.shape[:3], dtype=torch.float32, device=keys.device)
        for start in range(0, n, self.chunk):
            block = queries[:, :, start : start + self.chunk]
            received = grouped_attention(block, keys, first=start).sum(dim=3).mean(dim=2)
            total[..., : received.shape[-1]] += received
        return protect_recent(total, min(self.recent, n))
