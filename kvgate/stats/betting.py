"""A FAIL test over clusters that holds for any dependence inside a cluster: cluster shares tested by
betting, the single cases by their exact binomial tail (docs/gate.md, "Clusters").

A slice's control passes fall into G multi-case clusters of sizes m_1 … m_G beside n_s single cases.
Cluster i's failure share X_i = T_i / m_i lies in [0, 1] and, under H0 (rate ≤ τ), has mean ≤ τ,
whatever the dependence among its cases; clusters are independent of each other and of the singles.
For a fixed bet λ ∈ [0, 1/τ), 1 + λ(X_i − τ) ≥ 0 has expectation ≤ 1, so the product over clusters is
an e-value (Waudby-Smith & Ramdas 2024, "Estimating means of bounded random variables by betting",
JRSS-B: the capital process of a bettor against the mean); so is any fixed average of such products,
the mixture over a grid of bets, which needs no order among the clusters. Bet j on a cluster of size m
is λ_j(m) = min(f_j·λ*(m), CAP/τ), with λ*(m) = (μ₁ − τ) / (μ₁(1 − μ₁)/m + (μ₁ − τ)²) the Kelly
bet against the alternative μ₁ = min(2τ, (1 + τ)/2) with independent cases inside the cluster: a
cluster whose share varies little (per-case defects in a large cluster) is bet on heavily, and a cluster
that fails whole or not at all (share 0 or 1) still keeps the e-value's expectation ≤ 1.

The singles' exceedance p-value p_s = P(Binomial(n_s, τ) ≥ k_s) is exact and independent of the
clusters' e-value E, so min(1, p_s / E) is a valid p-value: P(p_s ≤ t·E) ≤ E[min(1, t·E)] ≤ t for every
t ∈ [0, 1] (an e-weighted p-value; Ignatiadis, Wang & Ramdas 2024, "E-values as unnormalized weights in
multiple testing", Biometrika). With no multi-case cluster it is the exact binomial test.
"""

from __future__ import annotations

import numpy as np
from scipy.special import bdtrc

BET_FRACTIONS = np.array([0.75, 1.0, 1.25, 1.5, 1.75])
"""f_j: the mixture's bets as multiples of the Kelly bet λ*(m), equal weights (chosen by simulation on the
shapes of bench/gate_shapes.py, declared here before any run)."""
CAP = 0.95
"""No bet exceeds CAP/τ, so a cluster with no failure keeps 1 − CAP of the capital at worst."""


def bet_sizes(size: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """λ_j(m), shape (..., J) for sizes and τ broadcast to (...)."""
    m = np.maximum(np.asarray(size, dtype=float), 1.0)[..., None]
    t = np.clip(np.asarray(tau, dtype=float), 1e-9, 1.0 - 1e-9)[..., None]
    mu1 = np.minimum(2.0 * t, (1.0 + t) / 2.0)
    kelly = (mu1 - t) / (mu1 * (1.0 - mu1) / m + (mu1 - t) ** 2)
    return np.minimum(BET_FRACTIONS * kelly, CAP / t)


def cluster_evalue(failed: np.ndarray, size: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Mixture betting e-value of H0: rate ≤ τ from the clusters of more than one case, shape (...).

    failed, size: (..., P) failures and control passes per cluster (entries with size < 2 are skipped:
    they are single cases or absent); tau broadcasts to (...)."""
    t = np.asarray(failed, dtype=float)
    m = np.asarray(size, dtype=float)
    tau = np.broadcast_to(np.asarray(tau, dtype=float), m.shape[:-1])
    use = m >= 2
    share = np.where(use, t / np.maximum(m, 1.0), 0.0)
    lam = bet_sizes(m, tau[..., None])  # (..., P, J)
    step = np.where(use[..., None], np.log1p(lam * (share - tau[..., None])[..., None]), 0.0)
    return np.asarray(np.exp(step.sum(axis=-2)).mean(axis=-1))


def fail_pvalue(
    k_single: np.ndarray, n_single: np.ndarray, failed: np.ndarray, size: np.ndarray, tau: np.ndarray
) -> np.ndarray:
    """min(1, P(Binomial(n_s, τ) ≥ k_s) / E): valid for H0 rate ≤ τ whatever the clusters' dependence.

    k_single, n_single, tau: (...); failed, size: (..., P)."""
    k = np.asarray(k_single, dtype=np.int64)
    n = np.asarray(n_single, dtype=np.int64)
    tau = np.asarray(tau, dtype=float)
    p_single = np.where(k <= 0, 1.0, bdtrc(np.maximum(k - 1, 0), np.maximum(n, 1), tau))
    return np.minimum(1.0, p_single / cluster_evalue(failed, size, tau))


def smallest_fail_pvalue(n_single: np.ndarray, size: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """`fail_pvalue` when every case fails: the smallest it can give (τ^n_s over the clusters' largest
    e-value), from sizes alone."""
    n = np.asarray(n_single, dtype=float)
    tau = np.asarray(tau, dtype=float)
    return np.minimum(1.0, tau**n / cluster_evalue(size, size, tau))


def fail_lower_bound(
    k_single: int, n_single: int, failed: np.ndarray, size: np.ndarray, level: float
) -> float:
    """The one-sided lower bound at error `level` that inverts `fail_pvalue`: the rate τ' at which its
    p-value crosses `level` (bisection on τ'; 0 when no τ' is rejected). Sizes (P,) of one slice."""
    if k_single <= 0 and not (np.asarray(failed) > 0).any():
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        p = float(fail_pvalue(np.array(k_single), np.array(n_single), failed, size, np.array(mid)))
        if p <= level:
            lo = mid
        else:
            hi = mid
    return lo
