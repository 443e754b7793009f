"""DeLong's AUC interval (stats.roc) against its definition computed pair by pair, with ties."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import mannwhitneyu, norm

from kvgate.stats.roc import delong_auc, midranks
from kvgate.stats.tests import auc


def brute_force(pos: np.ndarray, neg: np.ndarray, confidence: float) -> tuple[float, float, float, float]:
    """AUC, SE and interval from the pairwise kernel ψ(x, y) = 1, ½, 0 for x >, =, < y (DeLong 1988)."""
    psi = np.array([[1.0 if x > y else 0.5 if x == y else 0.0 for y in neg] for x in pos])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    a = float(psi.mean())
    se = float(np.sqrt(v10.var(ddof=1) / pos.size + v01.var(ddof=1) / neg.size))
    z = float(norm.ppf(0.5 + confidence / 2))
    return a, se, max(0.0, a - z * se), min(1.0, a + z * se)


def test_hand_computed_with_a_tie() -> None:
    # Pairs (3,1) (3,2) (2,1) win, (2,2) ties: AUC 3.5/4. Placements ¾ and 1 each side: var 1/32 per side.
    found = delong_auc([3.0, 2.0, 1.0, 2.0], [True, True, False, False])
    assert found is not None
    assert found.auc == 0.875
    assert found.se == pytest.approx(np.sqrt(2 * 0.03125 / 2))
    assert (found.positives, found.negatives) == (2, 2)
    assert found.upper == 1.0  # clipped


def test_all_tied_is_chance_and_perfect_separation_has_no_width() -> None:
    tied = delong_auc([5.0] * 6, [True, False] * 3)
    assert tied is not None and tied.auc == 0.5 and tied.se == 0.0
    perfect = delong_auc([9.0, 8.0, 1.0, 2.0], [True, True, False, False])
    assert perfect is not None and (perfect.auc, perfect.lower, perfect.upper) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("seed", range(6))
def test_matches_pairwise_definition_and_mann_whitney(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(2, 40)), int(rng.integers(2, 40))
    # Rounded scores: many ties within and across the classes.
    pos = np.round(rng.normal(0.6, 1.0, m), 1)
    neg = np.round(rng.normal(0.0, 1.0, n), 1)
    scores = np.concatenate([pos, neg])
    labels = np.r_[np.ones(m, bool), np.zeros(n, bool)]
    perm = rng.permutation(m + n)
    found = delong_auc(scores[perm], labels[perm], confidence=0.9)
    assert found is not None
    a, se, lo, hi = brute_force(pos, neg, 0.9)
    assert found.auc == pytest.approx(a, abs=1e-12)
    assert found.se == pytest.approx(se, abs=1e-12)
    assert (found.lower, found.upper) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    u = mannwhitneyu(pos, neg, alternative="two-sided", method="asymptotic").statistic
    assert found.auc == pytest.approx(u / (m * n), abs=1e-12)
    assert found.auc == pytest.approx(auc(scores, labels), abs=1e-12)


def test_midranks_share_the_mean_rank() -> None:
    assert midranks(np.array([2.0, 1.0, 2.0, 3.0, 2.0])).tolist() == [3.0, 1.0, 3.0, 5.0, 3.0]
    for values in itertools.product([0.0, 1.0], repeat=4):
        ranks = midranks(np.array(values))
        assert ranks.sum() == pytest.approx(10.0)


def test_refuses_too_few_and_bad_input() -> None:
    assert delong_auc([1.0, 2.0, 3.0], [True, False, False]) is None
    assert delong_auc([], []) is None
    with pytest.raises(ValueError, match="finite"):
        delong_auc([1.0, np.nan, 2.0, 3.0], [True, True, False, False])
    with pytest.raises(ValueError, match="shape"):
        delong_auc([1.0, 2.0], [True])
    with pytest.raises(ValueError, match="confidence"):
        delong_auc([1.0, 2.0, 3.0, 4.0], [True, True, False, False], confidence=1.0)
