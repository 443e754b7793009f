"""Paired tests: McNemar's exact test, the exact binomial exceedance test, Fisher's one-sided test of
candidate against A/A replicate, Holm's correction, and AUC.

Binomial tails come from scipy.special (bdtr, bdtrc), not scipy.stats, to keep report start-up fast.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import bdtr, bdtrc, betainc, gammaln


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


def effective_exceed_pvalue(k: np.ndarray, n: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """`exceed_pvalue` for real-valued effective counts: the regularised incomplete beta I_τ(k, n − k + 1),
    which is P(Binomial(n, τ) ≥ k) at integer k; 1 where k = 0, NaN where n = 0. Its smallest value, at
    k = n, is τⁿ."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    tau = np.broadcast_to(np.asarray(tau, dtype=float), np.broadcast_shapes(k.shape, n.shape))
    with np.errstate(invalid="ignore"):
        p = np.where(k <= 0, 1.0, betainc(np.maximum(k, 1e-12), np.maximum(n - k + 1, 1.0), tau))
    return np.where(n <= 0, np.nan, np.clip(p, 0.0, 1.0))


def fisher_greater(a: np.ndarray, n1: np.ndarray, b: np.ndarray, n2: np.ndarray) -> np.ndarray:
    """One-sided Fisher exact p-values that rate a/n1 exceeds rate b/n2: P(X ≥ a) for X hypergeometric
    (n1 + n2 items, a + b of them failures, n1 drawn). NaN where n1 or n2 is 0. Fisher (1935); conditional
    and conservative, which suits a test that may only withhold a FAIL."""
    a, b, n1, n2 = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in (a, b, n1, n2)))
    p = hypergeom_sf(a, n1 + n2, a + b, n1)
    return np.where((n1 <= 0) | (n2 <= 0), np.nan, np.clip(p, 0.0, 1.0))


def _log_choose(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    return np.asarray(gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1))


def hypergeom_sf(x: np.ndarray, total: np.ndarray, successes: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """P(X ≥ x) for X hypergeometric (`draws` from `total` items of which `successes` count), summed over
    the support term by term with scipy.special's log-gamma (scipy.stats stays off the report's path)."""
    x, total, successes, draws = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.int64) for v in (x, total, successes, draws))
    )
    start = np.maximum(x, np.maximum(0, draws - (total - successes)))
    stop = np.minimum(draws, successes)
    log_all = _log_choose(total, draws)
    p = np.zeros(x.shape)
    for j in range(int(np.max(stop - start, initial=-1)) + 1):
        k = start + j
        inside = k <= stop
        kk = np.where(inside, k, 0)
        term = np.exp(_log_choose(successes, kk) + _log_choose(total - successes, draws - kk) - log_all)
        p += np.where(inside, term, 0.0)
    return np.minimum(p, 1.0)


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
