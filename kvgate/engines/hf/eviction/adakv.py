"""AdaKV: SnapKV's scores, the layer's budget shared unevenly among its heads (`budgets`).

Feng et al., 2024, "Ada-KV: Optimizing KV Cache Eviction by Adaptive Budget Allocation for Efficient
LLM Inference" (arXiv:2407.11550); the Ada-SnapKV variant, as kvpress's AdaKVPress over SnapKVPress.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvgate.engines.hf.eviction.base import ScoringInputs, check_ratio
from kvgate.engines.hf.eviction.budgets import adaptive_head_counts
from kvgate.engines.hf.eviction.snapkv import SnapKV


@dataclass(frozen=True)
class AdaKV:
    """Scores [B, Hkv, n] are SnapKV's (window `window`); a layer keeps Hkv·k entries in all, its heads
    as many each as they hold of the layer's top scores, at least ⌊k·safeguard⌋ (kvpress: 0.2)."""

    ratio: float = 0.5
    window: int = 32
    safeguard: float = 0.2

    @property
    def query_window(self) -> int:
        return self.window

    def __post_init__(self) -> None:
        check_ratio(self.ratio)
        if not 0.0 <= self.safeguard <= 1.0:
            raise ValueError(f"safeguard must be in [0, 1], got {self.safeguard}")

    def scores(self, inputs: ScoringInputs) -> torch.Tensor:
        return SnapKV(self.ratio, self.window).scores(inputs)

    def head_counts(
        self, scores: torch.Tensor, keep: int, layer: int, layers: int, convention: str
    ) -> torch.Tensor:
        """[B, Hkv] entries each head of `layer` keeps, k = `keep` on average."""
        return adaptive_head_counts(scores, keep, self.safeguard, convention)
