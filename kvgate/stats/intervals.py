"""Exact (Clopper–Pearson) one-sided binomial bounds, through scipy's beta quantiles.

Clopper & Pearson, 1934, "The use of confidence or fiducial limits illustrated in the case of the
binomial". For k successes in n trials at confidence c: upper = Beta⁻¹(c; k+1, n−k) (1 when k = n),
lower = Beta⁻¹(1−c; k, n−k+1) (0 when k = 0). Each bound alone holds with confidence c; together they
form a two-sided interval of confidence 2c − 1. Beta⁻¹ is scipy.special.betaincinv (the inverse of the
regularised incomplete beta function), which keeps the heavy scipy.stats import off the report's path.
"""

from __future__ import annotations

import numpy as np
from scipy.special import betaincinv


def _check(k: int, n: int, confidence: float) -> None:
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 ≤ k ≤ n, got k={k}, n={n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def cp_upper(k: int, n: int, confidence: float) -> float | None:
    """One-sided upper bound of the rate k/n, or None when n = 0 (no evidence, not zero)."""
    _check(k, n, confidence)
    if n == 0:
        return None
    return 1.0 if k == n else float(betaincinv(k + 1, n - k, confidence))


def cp_lower(k: int, n: int, confidence: float) -> float | None:
    """One-sided lower bound of the rate k/n, or None when n = 0."""
    _check(k, n, confidence)
    if n == 0:
        return None
    return 0.0 if k == 0 else float(betaincinv(k, n - k + 1, 1 - confidence))


def cp_bounds(k: np.ndarray, n: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised one-sided (lower, upper) bounds for arrays k, n of one shape; NaN where n = 0."""
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    if k.shape != n.shape or np.any(n < 0) or np.any(k < 0) or np.any(k > n):
        raise ValueError("need arrays of one shape with 0 ≤ k ≤ n")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    with np.errstate(invalid="ignore", divide="ignore"):
        upper = np.where(k >= n, 1.0, betaincinv(k + 1, np.maximum(n - k, 1), confidence))
        lower = np.where(k == 0, 0.0, betaincinv(np.maximum(k, 1), n - k + 1, 1 - confidence))
    empty = n == 0
    return np.where(empty, np.nan, lower), np.where(empty, np.nan, upper)


def effective_bounds(k: np.ndarray, n: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided (lower, upper) exact bounds for real-valued effective counts (stats.clusters); NaN where
    n = 0. The beta quantiles take real arguments, so for integer k and n they equal `cp_bounds`."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    with np.errstate(invalid="ignore", divide="ignore"):
        upper = np.where(k >= n, 1.0, betaincinv(k + 1, np.maximum(n - k, 1e-12), confidence))
        lower = np.where(k <= 0, 0.0, betaincinv(np.maximum(k, 1e-12), n - k + 1, 1 - confidence))
    empty = n <= 0
    return np.where(empty, np.nan, lower), np.where(empty, np.nan, upper)
