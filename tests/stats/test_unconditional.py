"""The one-sided unconditional exact test of paired proportions (stats.unconditional) against a brute
force over every 2×2 table, its size on the null's boundary, and its power beside McNemar's exact test."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import bdtrc, gammaln

from kvgate.stats import unconditional
from kvgate.stats.unconditional import paired_worse_pvalue


def tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    b, c = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = b + c <= n
    return b[keep], c[keep]


def trinomial(b: np.ndarray, c: np.ndarray, n: int, pb: float, pc: float) -> np.ndarray:
    return stats.multinomial.pmf(np.stack([b, c, n - b - c], axis=-1), n, [pb, pc, 1 - pb - pc])


def z(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.where(b + c > 0, (b - c) / np.sqrt(np.maximum(b + c, 1)), 0.0)


@pytest.mark.parametrize(("b", "c"), [(3, 0), (5, 1), (6, 3), (9, 2)])
def test_pvalue_is_the_supremum_over_the_boundary(b: int, c: int) -> None:
    n = 12
    bb, cc = tables(n)
    extreme = z(bb, cc) >= z(np.array(b), np.array(c)) - 1e-12
    brute = max(
        trinomial(bb, cc, n, psi / 2, psi / 2)[extreme].sum() for psi in np.linspace(1e-4, 0.9999, 3000)
    )
    assert paired_worse_pvalue(b, c, n) == pytest.approx(brute, rel=2e-3)


@pytest.mark.parametrize(("pb", "pc"), [(0.02, 0.02), (0.1, 0.1), (0.3, 0.3), (0.05, 0.2)])
def test_size_stays_within_the_level(pb: float, pc: float) -> None:
    n = 30
    bb, cc = tables(n)
    p = paired_worse_pvalue(bb, cc, n)
    for level in (0.05, 0.3):
        assert trinomial(bb, cc, n, pb, pc)[p < level].sum() <= level * 1.002


def test_it_is_more_powerful_than_mcnemars_exact_test() -> None:
    """n = 150 control passes, candidate alone failing 9.5%, replicate alone 4.5% (the 5%-flip A/A)."""
    n = 150
    bb, cc = tables(n)
    prob = trinomial(bb, cc, n, 0.095, 0.045)
    conditional = np.where(bb > 0, stats.binom.sf(bb - 1, np.maximum(bb + cc, 1), 0.5), 1.0)
    unconditional = paired_worse_pvalue(bb, cc, n)
    for level in (0.05, 0.3):
        assert prob[unconditional < level].sum() > prob[conditional < level].sum() + 0.02


def test_no_evidence_gives_one() -> None:
    assert (
        list(paired_worse_pvalue(np.array([0, 2, 3]), np.array([0, 2, 5]), np.array([10, 10, 10])))
        == [1.0] * 3
    )


def test_large_samples_sum_only_where_the_mass_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond FULL_UP_TO pairs each ψ's binomial is summed over its window only: the same p-values."""
    tables_ = [(5, 0, 6000), (120, 80, 5000), (60, 20, 10000)]
    windowed = [unconditional._pvalue(b, c, n) for b, c, n in tables_]
    monkeypatch.setattr(unconditional, "FULL_UP_TO", 10**9)
    unconditional._pvalue.cache_clear()
    full = [unconditional._pvalue(b, c, n) for b, c, n in tables_]
    unconditional._pvalue.cache_clear()
    assert windowed == pytest.approx(full, rel=1e-12, abs=1e-18)


def summed_over_every_window(b: int, c: int, n: int) -> float:
    """The p-value for n > FULL_UP_TO as first written: every tail evaluated, every ψ's window summed."""
    z = (b - c) / np.sqrt(b + c)
    s = np.arange(n + 1)
    need = np.ceil((s + z * np.sqrt(s)) / 2 - 1e-9)
    inner = np.where(need <= 0, 1.0, np.where(need > s, 0.0, bdtrc(np.maximum(need - 1, 0), s, 0.5)))
    inner[0] = 0.0
    log_choose = gammaln(n + 1) - gammaln(s + 1) - gammaln(n - s + 1)
    best = 0.0
    for psi in unconditional.PSI_GRID:
        half = 12.0 * np.sqrt(n * psi * (1 - psi)) + 12.0
        lo, hi = max(0, int(n * psi - half)), min(n, int(n * psi + half) + 1)
        w = s[lo : hi + 1]
        log_pmf = log_choose[lo : hi + 1] + w * np.log(psi) + (n - w) * np.log1p(-psi)
        best = max(best, float(np.exp(log_pmf) @ inner[lo : hi + 1]))
    return min(1.0, best)


@pytest.mark.parametrize(
    ("b", "c", "n"),
    [
        (5, 0, 6000), (120, 80, 5000), (60, 20, 10000), (41, 30, 4001), (900, 0, 30000), (1500, 0, 40000),
        (418, 0, 20799), (1238, 0, 62402), (2000, 0, 60000), (2000, 1900, 50000), (700, 650, 9000),
        (12, 0, 45000),
    ],
)  # fmt: skip
def test_skipped_tails_and_windows_change_no_bit(b: int, c: int, n: int) -> None:
    """Tails under Hoeffding's e^−800 are not evaluated and windows of zero tails not summed: the same
    double as summing everything (z from 1.3 to 45, p-values from 0.12 to 0.0)."""
    unconditional._pvalue.cache_clear()
    assert unconditional._pvalue(b, c, n) == summed_over_every_window(b, c, n)


@pytest.mark.parametrize(
    ("b", "c", "n"),
    [(1213, 0, 62401), (406, 0, 20800), (119, 0, 4992), (1420, 0, 80000), (12, 0, 45000), (30, 10, 9000)],
)
def test_tail_bounds_are_above_every_tail(b: int, c: int, n: int) -> None:
    """The bound each ψ is pruned by holds tail by tail, from z = 3 to 38 (beside 1 where it is loose)."""
    z = (b - c) / np.sqrt(b + c)
    s = np.arange(n + 1)
    need = np.ceil((s + z * np.sqrt(s)) / 2 - 1e-9)
    exact = unconditional.tails(need, s)
    bound = unconditional.tail_bounds(need, s, unconditional.log_factorials(n))
    assert np.all(bound >= exact)
    steep = (exact > 1e-250) & (2 * need + 1 > s) & (z > 10)
    assert np.all(bound[steep] <= exact[steep] * (1 + 2 / z**2) + 1e-299)  # Feller's: within 1 + 1/z²


@pytest.mark.parametrize(
    ("b", "c", "n", "share"),
    [(1213, 0, 62401, 0.15), (406, 0, 20800, 0.15), (1283, 0, 62424, 0.15), (119, 0, 4992, 0.8)],
)
def test_pruned_windows_change_no_bit(
    b: int, c: int, n: int, share: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A/A tables of the 10⁶-row benchmark (z 11 to 36): the ψ whose bounds cannot beat the largest sum
    are not summed nor their tails evaluated (under `share` of them are), and the p-value is the double
    summing every ψ gives."""
    evaluated = []

    def counted(k: np.ndarray, m: np.ndarray, p: float) -> np.ndarray:
        evaluated.append(np.size(k))
        return bdtrc(k, m, p)

    monkeypatch.setattr(unconditional, "bdtrc", counted)
    unconditional._pvalue.cache_clear()
    pruned = unconditional._pvalue(b, c, n)
    monkeypatch.undo()
    unconditional._pvalue.cache_clear()
    assert pruned == summed_over_every_window(b, c, n)
    assert sum(evaluated) < share * n
