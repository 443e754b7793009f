"""SnapKV: keep what the last `window` prompt queries attend to, pooled so neighbours come along.

Li et al., 2024, "SnapKV: LLM Knows What You are Looking for Before Generation" (arXiv:2404.14469).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kvgate.engines.hf.eviction.attention import grouped_attention, protect_recent
from kvgate.engines.hf.eviction.base import ScoringInputs, check_ratio


@dataclass(frozen=True)
class SnapKV:
    """Score = attention from the observation window, averaged, then pooled along positions.

    With w = min(window, n): the queries of the last w positions ([B, Hq, w, D]) attend over all n keys
    (causal inside the window) → [B, Hkv, G, w, n]; the mean over the G query heads of each group and
    the w queries gives [B, Hkv, n]. The prefix scores [B, Hkv, n − w] are pooled with a stride-1
    window of `kernel_size` (`pooling` "avg", the paper's default, or "max"; zero/−inf padding keeps
    the length), and the w window entries are always kept. The paper selects per query head; with
    GQA the cache is per key head, so the group's heads are averaged.
    """

    ratio: float = 0.5
    window: int = 32
    kernel_size: int = 5
    pooling: str = "avg"

    @property
    def query_window(self) -> int:
        """The prompt queries it reads: the last `window` (capture only those, `capture_queries`)."""
        return self.window

    def __post_init__(self) -> None:
        check_ratio(self.ratio)
        if self.window < 1:
            raise ValueError(f"window must be ≥ 1, got {self.window}")
        if self.kernel_size < 1 or self.kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd and ≥ 1, got {self.kernel_size}")
        if self.pooling not in ("avg", "max"):
            raise ValueError(f"pooling must be 'avg' or 'max', got {self.pooling!r}")

    def scores(self, inputs: ScoringInputs) -> torch.Tensor:
        n = inputs.n
        w = min(self.window, n)
        queries = inputs.queries[:, :, -w:]  # the window's queries: all n captured, or only these
        if queries.shape[2] != w:
            raise ValueError(f"SnapKV needs the queries of the last {w} positions, got {queries.shape[2]}")
        probs = grouped_attention(queries, inputs.keys, first=n - w)
        score = probs.mean(dim=(2, 3))
        prefix = score[..., : n - w]
        if prefix.shape[-1] > 0 and self.kernel_size > 1:
            b, h, length = prefix.shape
            flat = prefix.reshape(b * h, 1, length)
            pool = F.avg_pool1d if self.pooling == "avg" else F.max_pool1d
            pooled = pool(flat, self.kernel_size, stride=1, padding=self.kernel_size // 2)
            score = torch.cat([pooled.reshape(b, h, length), score[..., n - w :]], dim=-1)
        return protect_recent(score, w)
