"""The clusters' betting e-value and the e-weighted FAIL p-value (stats.betting): exact by enumeration
under several dependences inside a cluster, the binomial test without clusters, and the power per-case
defects buy back."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from kvgate.stats.betting import cluster_evalue, fail_lower_bound, fail_pvalue, smallest_fail_pvalue

TAU = 0.2


def within(m: int, kind: str) -> np.ndarray:
    """pmf of a cluster's failure count T on 0 … m with mean m·τ, under one kind of dependence."""
    t = np.arange(m + 1)
    if kind == "per_case":
        return stats.binom.pmf(t, m, TAU)
    if kind == "whole":
        return np.where(t == 0, 1 - TAU, np.where(t == m, TAU, 0.0))
    if kind == "beta":
        return stats.betabinom.pmf(t, m, TAU * 2.0, (1 - TAU) * 2.0)
    pmf = np.zeros(m + 1)  # "half": half the cluster fails together, at twice the rate
    pmf[0], pmf[m // 2] = 1 - 2 * TAU * m / (2 * (m // 2)), 2 * TAU * m / (2 * (m // 2))
    return pmf


@pytest.mark.parametrize("kind", ["per_case", "whole", "beta", "half"])
def test_the_combined_pvalue_is_valid_whatever_the_dependence(kind: str) -> None:
    """Clusters of 5 and 3 beside 6 single cases at rate τ: P(p ≤ t) ≤ t for every t, summed exactly over
    all outcomes (no Monte Carlo)."""
    sizes, singles = np.array([5, 3]), 6
    pmfs = [within(int(m), kind) for m in sizes]
    np.testing.assert_allclose(
        [(np.arange(m + 1) * p).sum() / m for m, p in zip(sizes, pmfs, strict=True)], TAU
    )
    outcomes = np.array(list(itertools.product(range(6), range(4), range(singles + 1))))
    prob = pmfs[0][outcomes[:, 0]] * pmfs[1][outcomes[:, 1]] * stats.binom.pmf(outcomes[:, 2], singles, TAU)
    grid = np.broadcast_to(sizes, (len(outcomes), 2))
    singles_n = np.full(len(outcomes), singles)
    p = fail_pvalue(outcomes[:, 2], singles_n, outcomes[:, :2], grid, np.full(len(outcomes), TAU))
    expectation = (
        prob * cluster_evalue(outcomes[:, :2], np.broadcast_to(sizes, (len(outcomes), 2)), TAU)
    ).sum()
    assert expectation <= 1 + 1e-9
    for t in (0.01, 0.05, 0.1, 0.2, 0.5):
        assert prob[p <= t].sum() <= t + 1e-12, (t, prob[p <= t].sum())


def test_without_clusters_it_is_the_exact_binomial_test() -> None:
    k, n = np.arange(0, 31), np.full(31, 30)
    empty = np.zeros((31, 0))
    got = fail_pvalue(k, n, empty, empty, np.full(31, 0.05))
    np.testing.assert_allclose(got, np.where(k > 0, stats.binom.sf(k - 1, 30, 0.05), 1.0), rtol=1e-10)
    assert np.isclose(smallest_fail_pvalue(np.array(30), np.zeros(0), np.array(0.05)), 0.05**30)


def test_per_case_defects_in_large_clusters_buy_power_back() -> None:
    """Ten clusters of 20 beside 100 single cases: at 2τ with per-case failures the test rejects ≥ 88% of
    the time (the singles alone: 55%), at τ with whole-cluster failures within α."""
    rng = np.random.default_rng(3)
    runs, sizes, tau = 4_000, np.full(10, 20), 0.05

    def rejects(rate: float, whole: bool) -> float:
        failed = (rng.random((runs, 10)) < rate) * sizes if whole else rng.binomial(sizes, rate, (runs, 10))
        singles = rng.binomial(100, rate, runs)
        p = fail_pvalue(
            singles, np.full(runs, 100), failed, np.broadcast_to(sizes, failed.shape), np.full(runs, tau)
        )
        return float(np.mean(p <= 0.05))  # fmt: skip

    assert rejects(0.10, whole=False) >= 0.88
    se = np.sqrt(0.05 * 0.95 / runs)
    assert rejects(0.05, whole=True) <= 0.05 + 3 * se and rejects(0.05, whole=False) <= 0.05 + 3 * se


def test_the_lower_bound_inverts_the_test() -> None:
    failed, size = np.array([3, 0, 2, 20]), np.array([20, 20, 20, 20])
    lower = fail_lower_bound(9, 100, failed, size, 0.05)
    assert 0.0 < lower < (9 + 25) / 180
    at = lambda t: float(fail_pvalue(np.array(9), np.array(100), failed, size, np.array(t)))  # noqa: E731
    assert at(lower - 1e-3) <= 0.05 < at(lower + 1e-3)
    assert fail_lower_bound(0, 100, np.zeros(4), size, 0.05) == 0.0
