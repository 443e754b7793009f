"""PyramidKV: SnapKV's scores, more entries kept in lower layers and fewer in higher ones (`budgets`).

Cai et al., 2024, "PyramidKV: Dynamic KV Cache Compression based on Pyramidal Information Funneling"
(arXiv:2406.02069); the budget rule as kvpress's PyramidKVPress states it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvgate.engines.hf.eviction.base import ScoringInputs, check_ratio
from kvgate.engines.hf.eviction.budgets import pyramid_layer_budget
from kvgate.engines.hf.eviction.snapkv import SnapKV


@dataclass(frozen=True)
class PyramidKV:
    """Scores [B, Hkv, n] are SnapKV's (window `window`); every head of layer l keeps
    `pyramid_layer_budget(n, ratio, l, L, window, beta)` entries (kvpress: beta 20)."""

    ratio: float = 0.5
    window: int = 32
    beta: float = 20.0

    @property
    def query_window(self) -> int:
        return self.window

    def __post_init__(self) -> None:
        check_ratio(self.ratio)
        if self.beta < 1:
            raise ValueError(f"beta must be ≥ 1, got {self.beta}")

    def scores(self, inputs: ScoringInputs) -> torch.Tensor:
        return SnapKV(self.ratio, self.window).scores(inputs)

    def head_counts(
        self, scores: torch.Tensor, keep: int, layer: int, layers: int, convention: str
    ) -> torch.Tensor:
        """[B, Hkv], every head of `layer` alike: the layer's pyramid budget, at most n."""
        b, h, n = scores.shape
        budget = min(n, pyramid_layer_budget(n, self.ratio, layer, layers, self.window, self.beta))
        return torch.full((b, h), budget, dtype=torch.long, device=scores.device)
