"""McNemar, Holm, the exceedance test and AUC against statsmodels, scipy and brute force."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from scipy.stats import binom, mannwhitneyu
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from kvgate.stats.intervals import cp_bounds
from kvgate.stats.paired import (
    BOTH_FAIL,
    CACHE_INDUCED,
    CANDIDATE_ONLY_PASS,
    PairedCounts,
    grouped_counts,
    pair_outcomes,
    paired_counts,
)
from kvgate.stats.tests import auc, exceed_pvalue, holm, mcnemar_exact


def test_mcnemar_matches_statsmodels_exact_on_random_tables() -> None:
    rng = np.random.default_rng(11)
    for _ in range(300):
        a, b, c, d = (int(x) for x in rng.integers(0, 60, size=4))
        if rng.random() < 0.2:
            c = b  # ties are the edge where p = 1
        table = np.array([[a, b], [c, d]])
        expected = mcnemar(table, exact=True).pvalue
        if b + c == 0:
            assert mcnemar_exact(b, c) is None
        else:
            assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_paired_counts_match_a_contingency_table() -> None:
    rng = np.random.default_rng(3)
    control = rng.random(1000) < 0.8
    candidate = rng.random(1000) < 0.7
    counts = paired_counts(control, candidate)
    assert counts.control_passes == int(control.sum())
    assert counts.cache_induced_failures == int((control & ~candidate).sum())
    assert counts.candidate_only_passes == int((~control & candidate).sum())
    assert counts.both_fail == int((~control & ~candidate).sum())
    assert counts.cfr == counts.cache_induced_failures / counts.control_passes
    outcomes = pair_outcomes(control, candidate, np.ones(1000, bool))
    again = PairedCounts.from_outcome_counts(np.bincount(outcomes, minlength=4))
    assert again == counts


def test_grouped_counts_equal_a_loop() -> None:
    rng = np.random.default_rng(5)
    groups = rng.integers(-1, 4, size=500)
    codes = rng.integers(-1, 4, size=500)
    got = grouped_counts(groups, 4, codes, 4)
    for g in range(4):
        for c in range(4):
            assert got[g, c] == int(((groups == g) & (codes == c)).sum())


def test_invalid_pairs_are_left_out_and_empty_is_none() -> None:
    outcomes = pair_outcomes(np.array([True, False]), np.array([False, False]), np.array([False, True]))
    assert list(outcomes) == [-1, BOTH_FAIL]
    counts = PairedCounts.from_outcome_counts(np.bincount(outcomes[outcomes >= 0], minlength=4))
    assert counts.control_passes == 0
    assert counts.cfr is None
    empty = paired_counts(np.array([], bool), np.array([], bool))
    assert empty.cfr is None and empty.total_failure_rate is None
    assert {CACHE_INDUCED, CANDIDATE_ONLY_PASS} == {1, 2}


def test_holm_matches_statsmodels() -> None:
    rng = np.random.default_rng(2)
    gc.freeze()  # statsmodels' Holm calls gc.collect() each time: ~0.2 s apiece over a test session's heap
    try:
        for _ in range(50):
            p = list(rng.random(rng.integers(1, 12)) ** 3)
            expected = multipletests(p, method="holm")[1]
            np.testing.assert_allclose(holm(p), expected, rtol=1e-12)
    finally:
        gc.unfreeze()
    assert holm([0.01, None, 0.04]) == [pytest.approx(0.02), None, pytest.approx(0.04)]


def test_exceedance_pvalue_is_the_dual_of_the_lower_bound() -> None:
    rng = np.random.default_rng(9)
    n = rng.integers(1, 400, size=2000)
    k = rng.integers(0, n + 1)
    tau = rng.choice([0.01, 0.05, 0.1, 0.2], size=2000)
    p = exceed_pvalue(k, n, tau)
    np.testing.assert_allclose(p, binom.sf(k - 1, n, tau), rtol=1e-9, atol=1e-200)
    for confidence in (0.9, 0.95):
        lower, _ = cp_bounds(k, n, confidence)
        away = np.abs(p - (1 - confidence)) > 1e-9  # exact ties are a float coin-toss
        assert np.array_equal((lower > tau)[away], (p < 1 - confidence)[away])
    assert np.isnan(exceed_pvalue(np.array([0]), np.array([0]), np.array([0.1]))[0])


def brute_force_auc(scores: np.ndarray, positives: np.ndarray) -> float:
    pos, neg = scores[positives], scores[~positives]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins) / (len(pos) * len(neg))


def test_auc_matches_brute_force_and_mann_whitney() -> None:
    rng = np.random.default_rng(4)
    for _ in range(30):
        scores = rng.integers(0, 8, size=80).astype(float)  # many ties
        positives = rng.random(80) < 0.3
        got = auc(scores, positives)
        assert got == pytest.approx(brute_force_auc(scores, positives), rel=1e-12)
        u = mannwhitneyu(scores[positives], scores[~positives]).statistic
        assert got == pytest.approx(u / (positives.sum() * (~positives).sum()), rel=1e-12)
    assert auc([1.0, 2.0], [True, True]) is None
    assert auc([3.0, 1.0, 2.0], [True, False, False]) == 1.0
