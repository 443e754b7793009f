"""Random eviction: the baseline every scoring method must beat (named `random_`: no stdlib shadowing)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from kvgate.engines.hf.eviction.base import ScoringInputs, check_ratio


@dataclass(frozen=True)
class RandomEviction:
    """Score = uniform noise [B, Hkv, n], drawn from a generator seeded by (seed, layer).

    The same seed and layer always give the same scores (on any device: they are drawn on the CPU);
    another seed or another layer gives independent ones. Needs no queries.
    """

    ratio: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        check_ratio(self.ratio)
        if self.seed < 0:
            raise ValueError(f"seed must be ≥ 0, got {self.seed}")

    def scores(self, inputs: ScoringInputs) -> torch.Tensor:
        state = np.random.SeedSequence([self.seed, inputs.layer]).generate_state(1, dtype=np.uint64)[0]
        generator = torch.Generator(device="cpu").manual_seed(int(state) & (2**63 - 1))
        b, h, n, _ = inputs.keys.shape
        return torch.rand(b, h, n, generator=generator).to(inputs.keys.device)
