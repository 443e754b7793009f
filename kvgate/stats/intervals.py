"""Exact (Clopper–Pearson) one-sided binomial bounds, through scipy's beta quantiles.

Clopper & Pearson, 1934, "The use of confidence or fiducial limits illustrated in the case of the
binomial". For k successes in n trials at confidence c: upper = Beta⁻¹(c; k+1, n−k) (1 when k = n),
lower = Beta⁻¹(1−c; k, n−k+1) (0 when k = 0).
"""

from __future__ import annotations

from scipy.stats import beta


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
    return 1.0 if k == n else float(beta.ppf(confidence, k + 1, n - k))


def cp_lower(k: int, n: int, confidence: float) -> float | None:
    """One-sided lower bound of the rate k/n, or None when n = 0."""
    _check(k, n, confidence)
    if n == 0:
        return None
    return 0.0 if k == 0 else float(beta.ppf(1 - confidence, k, n - k + 1))
