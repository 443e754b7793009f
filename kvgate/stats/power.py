"""What a slice's evidence could show: the smallest CFR it would detect, and the control passes a PASS
would need.

Both are planning figures on effective counts, n_eff = n / deff with deff Kish's design effect at the ICC
the slice was tested at (stats.cluster_null; n_eff = n without clustering), so on clustered slices they
approximate the exact tests the gate runs. A slice fails when its exceedance p-value
I_τ(k_eff, n_eff − k_eff + 1) is at most its level α_i (its share of α in the weighted Holm family); the
p-value falls as k_eff grows, so there is a critical count k* and the slice fails when k ≥ ⌈k*·n/n_eff⌉.
"""

from __future__ import annotations

import numpy as np
from scipy.special import bdtri, betaincinv

from kvgate.stats.tests import effective_exceed_pvalue

POWER = 0.8
"""The minimum detectable CFR is the true CFR failed with this probability."""
MAX_PASSES = 10**9


def critical_failures(n: np.ndarray, n_eff: np.ndarray, tau: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Smallest number of cache-induced failures (of n control passes) whose exceedance p-value is ≤ level;
    n + 1 where even k = n is not enough (or level is 0)."""
    n = np.asarray(n, dtype=float)
    g = np.asarray(n_eff, dtype=float)
    tau = np.broadcast_to(np.asarray(tau, dtype=float), n.shape)
    level = np.broadcast_to(np.asarray(level, dtype=float), n.shape)
    lo, hi = np.zeros(n.shape), n.copy()
    reachable = (n > 0) & (effective_exceed_pvalue(g, g, tau) <= level)
    for _ in range(60):  # bisection on k (real), then round up
        mid = (lo + hi) / 2
        p = effective_exceed_pvalue(mid * g / np.maximum(n, 1), g, tau)
        ok = p <= level
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    k = np.ceil(hi - 1e-9)
    k = np.where(effective_exceed_pvalue(k * g / np.maximum(n, 1), g, tau) <= level, k, k + 1)
    return np.where(reachable, np.maximum(k, 1), n + 1).astype(np.int64)


def min_detectable(n: np.ndarray, n_eff: np.ndarray, tau: np.ndarray, level: np.ndarray) -> np.ndarray:
    """The true CFR a slice of n control passes fails with probability POWER (independent cases); NaN
    where no CFR can fail it."""
    n = np.asarray(n, dtype=np.int64)
    k = critical_failures(n, n_eff, tau, level)
    with np.errstate(invalid="ignore"):
        p = bdtri(np.maximum(k - 1, 0), np.maximum(n, 1), 1 - POWER)
    p = np.where(k <= 0, 0.0, p)
    return np.where((k > n) | (n <= 0), np.nan, p)


def passes_needed(
    cfr: np.ndarray, tau: np.ndarray, confidence: float, deff: np.ndarray, min_control_passes: int
) -> np.ndarray:
    """Control passes at which the exact upper bound of CFR would reach τ if the observed CFR held
    (deff: the slice's design effect, 1 without clustering); −1 where the observed CFR is ≥ τ."""
    cfr = np.asarray(cfr, dtype=float)
    tau = np.broadcast_to(np.asarray(tau, dtype=float), cfr.shape)
    deff = np.broadcast_to(np.asarray(deff, dtype=float), cfr.shape)
    possible = cfr < tau

    def upper(m: np.ndarray) -> np.ndarray:
        k = cfr * m
        with np.errstate(invalid="ignore"):
            return np.asarray(betaincinv(k + 1, np.maximum(m - k, 1e-12), confidence))

    lo, hi = np.zeros(cfr.shape), np.full(cfr.shape, float(MAX_PASSES))
    for _ in range(80):  # bisection on effective cases; the bound falls as m grows at a fixed rate
        mid = (lo + hi) / 2
        ok = upper(mid) <= tau
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    needed = np.maximum(np.ceil(np.ceil(hi - 1e-9) * deff), min_control_passes)
    reachable = possible & (upper(np.full(cfr.shape, float(MAX_PASSES))) <= tau)
    return np.where(reachable, needed, -1).astype(np.int64)
