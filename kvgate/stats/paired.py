"""Paired counts of control and candidate outcomes, and the cache-induced failure rate.

    CFR = count(control passes ∧ candidate fails) / count(control passes)

Pairs where both fail say nothing about the cache and stay out of the denominator. An empty
denominator gives no rate (None), never 0.0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PairedCounts:
    n_pairs: int
    control_passes: int
    cache_induced_failures: int
    candidate_only_passes: int
    both_fail: int
    candidate_failures: int

    @property
    def cfr(self) -> float | None:
        return self.cache_induced_failures / self.control_passes if self.control_passes else None

    @property
    def total_failure_rate(self) -> float | None:
        return self.candidate_failures / self.n_pairs if self.n_pairs else None


def paired_counts(control_passed: np.ndarray, candidate_passed: np.ndarray) -> PairedCounts:
    """Counts over aligned boolean arrays (one entry per case present in both arms)."""
    c = np.asarray(control_passed, dtype=bool)
    t = np.asarray(candidate_passed, dtype=bool)
    if c.shape != t.shape:
        raise ValueError(f"control and candidate arrays differ in shape: {c.shape} vs {t.shape}")
    return PairedCounts(
        n_pairs=int(c.size),
        control_passes=int(c.sum()),
        cache_induced_failures=int((c & ~t).sum()),
        candidate_only_passes=int((~c & t).sum()),
        both_fail=int((~c & ~t).sum()),
        candidate_failures=int((~t).sum()),
    )
