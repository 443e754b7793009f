"""The AUC of a score with DeLong's interval: how well a score ranks one kind of case above another.

The AUC is the Mann–Whitney probability that a positive scores above a negative, ties counting ½.
DeLong, DeLong & Clarke-Pearson (1988, "Comparing the areas under two or more correlated receiver
operating characteristic curves") estimate its variance from each case's placement: a positive's share of
the negatives it beats (ties ½), a negative's share of the positives that beat it, so that
var(AUC) = var(positive placements)/m + var(negative placements)/n. Placements come from midranks
(Sun & Xu, 2014), so the whole computation is a few sorts, exact and without resampling. The interval is
the normal one at the given two-sided confidence, clipped to [0, 1]; with perfect separation its width
is zero, a known limit of the method at small samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri


@dataclass(frozen=True)
class AucInterval:
    auc: float
    se: float
    lower: float
    upper: float
    positives: int
    negatives: int


def midranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of `values`, tied values sharing the mean of the ranks they span."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], ordered.size]
    mean_rank = (starts + ends + 1) / 2.0
    ranks = np.empty(values.size, dtype=float)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def delong_auc(
    scores: np.ndarray | Sequence[float], positives: np.ndarray | Sequence[bool], confidence: float = 0.95
) -> AucInterval | None:
    """The AUC of `scores` for ranking `positives` above the rest, with DeLong's standard error and a
    two-sided normal interval at `confidence`; None unless each class has at least two cases (the
    placements' variances need two)."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(positives, dtype=bool)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError(f"scores and labels must be 1-D of one shape: {s.shape} vs {y.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    pos, neg = s[y], s[~y]
    m, n = pos.size, neg.size
    if m < 2 or n < 2:
        return None
    combined = midranks(np.concatenate([pos, neg]))
    # A positive's rank among all minus its rank among positives = negatives below it (ties ½).
    pos_place = (combined[:m] - midranks(pos)) / n
    neg_place = 1.0 - (combined[m:] - midranks(neg)) / m
    auc = float(pos_place.mean())
    variance = float(pos_place.var(ddof=1) / m + neg_place.var(ddof=1) / n)
    se = float(np.sqrt(max(variance, 0.0)))
    z = float(ndtri(0.5 + confidence / 2.0))
    return AucInterval(
        auc=auc,
        se=se,
        lower=max(0.0, auc - z * se),
        upper=min(1.0, auc + z * se),
        positives=int(m),
        negatives=int(n),
    )
