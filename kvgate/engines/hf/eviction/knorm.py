"""Knorm: keep the keys with the smallest L2 norm.

Devoto et al., 2024, "A Simple and Effective L2 Norm-Based Strategy for KV Cache Compression"
(arXiv:2406.11430): low-norm keys draw high attention, so the largest-norm keys go first.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvgate.engines.hf.eviction.base import ScoringInputs, check_ratio


@dataclass(frozen=True)
class KNorm:
    """Score = −‖k‖₂ over the head dim: keys [B, Hkv, n, D] → [B, Hkv, n]. Needs no queries."""

    ratio: float = 0.5

    def __post_init__(self) -> None:
        check_ratio(self.ratio)

    def scores(self, inputs: ScoringInputs) -> torch.Tensor:
        return -torch.linalg.vector_norm(inputs.keys.float(), dim=-1)
