"""The exact failure-count distribution over unequal clusters, its tails and bounds, the ICC's bound, and
the mixture e-values, each against an independent reference (scipy.stats, direct convolution, numeric
integration)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.integrate import quad

from kvgate.stats.cluster_null import bounds, design_effect, icc_upper, log_pmf, sum_pmf, tails
from kvgate.stats.eprocess import all_failed_e_value, e_values
from kvgate.stats.intervals import cp_lower, cp_upper


@pytest.mark.parametrize("rho", [0.0, 0.01, 0.3, 0.9, 1.0])
def test_cluster_pmf_is_the_beta_binomial(rho: float) -> None:
    m, p, t = 7, 0.12, np.arange(8)
    got = np.exp(log_pmf(t, m, p, rho))
    if rho == 0:
        want = stats.binom.pmf(t, m, p)
    elif rho == 1:
        want = np.where(t == 0, 1 - p, np.where(t == m, p, 0.0))
    else:
        scale = 1 / rho - 1
        want = stats.betabinom.pmf(t, m, p * scale, (1 - p) * scale)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("rho", [0.0, 0.2, 1.0])
def test_sum_pmf_is_the_convolution_of_its_clusters(rho: float) -> None:
    sizes, singles, p = (2, 2, 5, 9), 13, 0.07
    want = stats.binom.pmf(np.arange(singles + 1), singles, p)
    for m in sizes:
        want = np.convolve(want, np.exp(log_pmf(np.arange(m + 1), m, p, rho)))
    np.testing.assert_allclose(sum_pmf(sizes, singles, p, rho), want, atol=1e-13)


def test_single_cases_give_the_binomial_tails_and_clopper_pearson_bounds() -> None:
    for k, n in ((0, 59), (3, 40), (40, 40)):
        ge, le = tails(k, (), n, 0.05, 1.0)
        assert ge == pytest.approx(stats.binom.sf(k - 1, n, 0.05)) and le == pytest.approx(
            stats.binom.cdf(k, n, 0.05)
        )
        lower, upper = bounds(k, (), n, 1.0, 0.05)
        assert upper == pytest.approx(cp_upper(k, n, 0.95), abs=1e-9)
        assert lower == pytest.approx(cp_lower(k, n, 0.95), abs=1e-9)


def test_clustered_bounds_invert_the_tails() -> None:
    sizes, singles, k, level = (20,) * 10, 100, 12, 0.045
    lower, upper = bounds(k, sizes, singles, 0.3, level)
    assert tails(k, sizes, singles, upper, 0.3)[1] == pytest.approx(level, abs=1e-9)
    assert tails(k, sizes, singles, lower, 0.3)[0] == pytest.approx(level, abs=1e-9)
    whole = bounds(0, (4,) * 16, 0, 1.0, level)[1]
    assert whole == pytest.approx(1 - level ** (1 / 16))  # no failure in 16 whole clusters: P(S=0) = (1−p)^16


def test_the_icc_bound_reads_how_failures_spread() -> None:
    size = np.full(40, 5)
    whole = np.array([5] * 8 + [0] * 32)
    spread = np.array([1] * 40)
    none = np.zeros(40, dtype=np.int64)
    assert icc_upper(whole, size, 0.005) == 1.0 and icc_upper(none, size, 0.005) == 1.0
    low, looser = icc_upper(spread, size, 0.005), icc_upper(spread, size, 0.2)
    assert looser <= low < 0.1
    batch = icc_upper(np.stack([whole, spread]), np.stack([size, size]), 0.005)
    assert list(batch) == [1.0, low]


def test_kish_design_effect_at_full_correlation() -> None:
    sizes = np.array([20] * 10 + [1] * 100)
    n, squares = sizes.sum(), (sizes**2).sum()
    assert n / design_effect(squares, n, 1.0) == pytest.approx(n**2 / squares)
    assert design_effect(squares, n, 0.0) == 1.0


def test_mixture_e_values_are_the_integrals() -> None:
    k, n, tau = 3, 40, 0.05

    def ratio(p: float) -> float:
        return (p / tau) ** k * ((1 - p) / (1 - tau)) ** (n - k)

    fail, passing = e_values(np.array(k), np.array(n), np.array(tau))
    assert float(fail) == pytest.approx(quad(ratio, tau, 1)[0] / (1 - tau), rel=1e-6)
    assert float(passing) == pytest.approx(quad(ratio, 0, tau)[0] / tau, rel=1e-6)
    assert (
        e_values(np.array(0), np.array(87), np.array(tau))[1]
        < 20
        <= e_values(np.array(0), np.array(88), np.array(tau))[1]
    )


def test_the_all_failed_e_value_is_the_mixture_at_k_equal_n() -> None:
    n = np.array([0, 1, 2, 7, 40, 300, 5_000])
    for tau in (1e-3, 0.05, 0.5, 0.9):
        closed = all_failed_e_value(n, np.array(tau))
        mixture, _ = e_values(n, n, np.array(tau))
        np.testing.assert_allclose(closed, mixture, rtol=1e-9)
        assert closed[0] == 1.0 and (np.diff(closed) >= 0).all()  # capped at e^700


def test_ville_keeps_the_anytime_fail_rule_within_alpha() -> None:
    """At the null's boundary, the share of paths whose FAIL e-value ever reaches 1/α over 1,000 cases."""
    rng = np.random.default_rng(3)
    x = rng.random((4_000, 1_000)) < 0.05
    k = np.cumsum(x, axis=1)
    n = np.arange(1, 1_001)
    fail, _ = e_values(k, np.broadcast_to(n, k.shape), np.array(0.05))
    assert np.mean(fail.max(axis=1) >= 20) <= 0.05
