"""Clopper–Pearson bounds against statsmodels' `proportion_confint(method="beta")` on random tables.

statsmodels gives a two-sided interval at level 1 − alpha, each side at alpha/2; a one-sided bound at
confidence c is therefore the matching side of the two-sided interval with alpha = 2(1 − c).
"""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from kvgate.stats.intervals import cp_bounds, cp_lower, cp_upper


@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
def test_one_sided_bounds_match_statsmodels(confidence: float) -> None:
    rng = np.random.default_rng(7)
    n = rng.integers(1, 500, size=300)
    k = rng.integers(0, n + 1)
    k[:10], k[10:20] = 0, n[10:20]  # both edges
    lo_ref, hi_ref = proportion_confint(k, n, alpha=2 * (1 - confidence), method="beta")
    lower, upper = cp_bounds(k, n, confidence)
    np.testing.assert_allclose(lower, lo_ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(upper, hi_ref, rtol=1e-9, atol=1e-12)
    for i in range(0, 300, 37):
        assert cp_lower(int(k[i]), int(n[i]), confidence) == pytest.approx(lo_ref[i], rel=1e-9, abs=1e-12)
        assert cp_upper(int(k[i]), int(n[i]), confidence) == pytest.approx(hi_ref[i], rel=1e-9, abs=1e-12)


def test_known_values() -> None:
    # 0 of n: the upper bound solves (1 − p)^n = 1 − c ("rule of three" at 95%: ≈ 3/n).
    assert cp_upper(0, 60, 0.95) == pytest.approx(1 - 0.05 ** (1 / 60))
    assert cp_lower(0, 60, 0.95) == 0.0
    assert cp_upper(60, 60, 0.95) == 1.0
    assert cp_lower(60, 60, 0.95) == pytest.approx(0.05 ** (1 / 60))


def test_empty_denominator_is_no_evidence_not_zero() -> None:
    assert cp_upper(0, 0, 0.95) is None
    assert cp_lower(0, 0, 0.95) is None
    lower, upper = cp_bounds(np.array([0, 1]), np.array([0, 2]), 0.95)
    assert np.isnan(lower[0]) and np.isnan(upper[0])
    assert not np.isnan(upper[1])


@pytest.mark.parametrize(("k", "n"), [(-1, 3), (4, 3), (0, -1)])
def test_impossible_counts_are_refused(k: int, n: int) -> None:
    with pytest.raises(ValueError):
        cp_upper(k, n, 0.95)
    with pytest.raises(ValueError):
        cp_bounds(np.array([k]), np.array([n]), 0.95)
