"""Paired tests: McNemar's exact test, the exact binomial exceedance test, Holm's correction, and AUC.

Binomial tails come from scipy.special (bdtr, bdtrc), not scipy.stats, to keep report start-up fast.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import bdtr, bdtrc


def mcnemar_pvalues(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Two-sided exact McNemar p-values for arrays of discordant counts b and c; NaN where b + c = 0.

    McNemar, 1947: under H0 each discordant pair goes either way with probability ½, so
    p = min(1, 2·P(Binomial(b + c, ½) ≤ min(b, c))), as statsmodels' `mcnemar(exact=True)` computes it.
    """
    b = np.asarray(b, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    if np.any(b < 0) or np.any(c < 0):
        raise ValueError("discordant counts must be ≥ 0")
    n = b + c
    p = np.minimum(1.0, 2.0 * bdtr(np.minimum(b, c), np.maximum(n, 1), 0.5))
    return np.where(n == 0, np.nan, p)


def mcnemar_exact(b: int, c: int) -> float | None:
    """Two-sided exact McNemar p-value for b and c discordant pairs; None when there are none."""
    p = float(mcnemar_pvalues(np.array([b]), np.array([c]))[0])
    return None if np.isnan(p) else p


def exceed_pvalue(k: np.ndarray, n: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """One-sided exact p-value of H0: rate ≤ τ against rate > τ, i.e. P(Binomial(n, τ) ≥ k); NaN for n = 0.

    Its dual is the Clopper–Pearson lower bound: p < 1 − c exactly when the bound at confidence c
    exceeds τ, so Holm-adjusting these p-values corrects the gate's "fail" across slices.
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    tau = np.broadcast_to(np.asarray(tau, dtype=float), k.shape)
    p = np.where(k <= 0, 1.0, bdtrc(np.maximum(k - 1, 0), np.maximum(n, 1), tau))
    return np.where(n == 0, np.nan, np.clip(p, 0.0, 1.0))


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm (1979) step-down adjusted p-values, in input order; None entries are left out and kept None."""
    present = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(present)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def auc(scores: np.ndarray | Sequence[float], positives: np.ndarray | Sequence[bool]) -> float | None:
    """Area under the ROC curve of `scores` for predicting `positives` (ties count half).

    The Mann–Whitney U of the positives over (n_pos · n_neg): for each positive, the negatives it beats
    plus half those it ties, counted by binary search in the sorted negatives. None when either class
    is empty. Hanley & McNeil, 1982, "The meaning and use of the area under a ROC curve".
    """
    s = np.asarray(scores, dtype=float)
    y = np.asarray(positives, dtype=bool)
    if s.shape != y.shape:
        raise ValueError(f"scores and labels differ in shape: {s.shape} vs {y.shape}")
    pos, neg = s[y], np.sort(s[~y])
    if pos.size == 0 or neg.size == 0:
        return None
    below = np.searchsorted(neg, pos, side="left")
    tied = np.searchsorted(neg, pos, side="right") - below
    return float(below.sum() + 0.5 * tied.sum()) / (pos.size * neg.size)
