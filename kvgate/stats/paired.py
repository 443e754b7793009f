"""Paired counts of control and candidate outcomes, and the cache-induced failure rate.

    CFR = count(control passes ∧ candidate fails) / count(control passes)

Pairs where both fail say nothing about the cache and stay out of the denominator. An empty
denominator gives no rate (None), never 0.0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BOTH_PASS, CACHE_INDUCED, CANDIDATE_ONLY_PASS, BOTH_FAIL = 0, 1, 2, 3
N_OUTCOMES = 4
NO_PAIR = -1
"""Outcome codes of one case's pair; NO_PAIR where either side is missing or an engine error."""


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

    @staticmethod
    def from_outcome_counts(row: np.ndarray) -> PairedCounts:
        """From counts indexed by outcome code (BOTH_PASS, CACHE_INDUCED, CANDIDATE_ONLY_PASS, BOTH_FAIL)."""
        both_pass, cio, cop, both_fail = (int(v) for v in row[:N_OUTCOMES])
        return PairedCounts(
            n_pairs=both_pass + cio + cop + both_fail,
            control_passes=both_pass + cio,
            cache_induced_failures=cio,
            candidate_only_passes=cop,
            both_fail=both_fail,
            candidate_failures=cio + both_fail,
        )


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


def pair_outcomes(control_passed: np.ndarray, candidate_passed: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per-case outcome code (int8): 2·(candidate passed) + (control passed) mapped to the codes above."""
    c = np.asarray(control_passed, dtype=bool)
    t = np.asarray(candidate_passed, dtype=bool)
    codes = np.select([c & t, c & ~t, ~c & t], [BOTH_PASS, CACHE_INDUCED, CANDIDATE_ONLY_PASS], BOTH_FAIL)
    return np.where(np.asarray(valid, dtype=bool), codes, NO_PAIR).astype(np.int8)


def grouped_counts(groups: np.ndarray, n_groups: int, codes: np.ndarray, n_codes: int) -> np.ndarray:
    """Counts of each code per group, shape (n_groups, n_codes); entries with group < 0 or code < 0 skip.

    `groups` and `codes` are per-case integer arrays of one length: one bincount, no Python loop.
    """
    g = np.asarray(groups, dtype=np.int64)
    c = np.asarray(codes, dtype=np.int64)
    keep = (g >= 0) & (c >= 0)
    flat = np.bincount(g[keep] * n_codes + c[keep], minlength=n_groups * n_codes)
    return flat.reshape(n_groups, n_codes)
