"""The clustered coverage interval: exact on independent cells, as wide as the clusters on perfectly
correlated ones, the worst case when every cell is covered."""

from __future__ import annotations

import numpy as np
import pytest

from kvgate.engines.hf.certificate.coverage import clustered_coverage
from kvgate.stats.intervals import effective_bounds


def two_sided(k: float, n: float) -> tuple[float, float]:
    """The exact interval at 95% (each side 97.5%) on (effective) counts."""
    lower, upper = effective_bounds(np.array(k), np.array(n), 0.975)
    return float(lower), float(upper)


def test_independent_cells_get_the_exact_interval() -> None:
    rng = np.random.default_rng(0)
    covered = (rng.random(400) < 0.9).astype(float)
    found = clustered_coverage(covered, np.arange(400))
    k = int(covered.sum())
    # Singleton clusters: the robust variance is p̂(1 − p̂)/(n − 1), so deff = n/(n − 1) exactly.
    assert found.design_effect == pytest.approx(400 / 399)
    assert (found.lower, found.upper) == pytest.approx(two_sided(k * 399 / 400, 399))
    assert found.lower < k / 400 < found.upper and found.share == k / 400


def test_cells_that_fail_together_count_as_one_draw_each() -> None:
    size, groups = 30, 40
    per_group = np.r_[np.ones(36), np.zeros(4)]  # 36 of 40 samples cover every cell they bound
    covered = np.repeat(per_group, size)
    clusters = np.repeat(np.arange(groups), size)
    found = clustered_coverage(covered, clusters)
    naive = clustered_coverage(covered, np.arange(covered.size))
    assert found.share == naive.share == 0.9
    assert found.design_effect == pytest.approx(size * groups / (groups - 1))
    assert (found.lower, found.upper) == pytest.approx(two_sided(0.9 * (groups - 1), groups - 1))
    assert found.upper - found.lower > 3 * (naive.upper - naive.lower)


def test_every_cell_covered_rests_on_the_clusters() -> None:
    found = clustered_coverage(np.ones(600), np.repeat(np.arange(20), 30))
    assert (found.share, found.upper, found.design_effect) == (1.0, 1.0, 30.0)
    assert found.lower == pytest.approx(two_sided(20, 20)[0])


def test_shares_of_several_draws_and_bad_input() -> None:
    found = clustered_coverage(np.array([1.0, 0.5, 0.75, 1.0]), np.array([0, 0, 1, 1]))
    assert found.share == pytest.approx(0.8125) and found.clusters == 2
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        clustered_coverage(np.array([1.5]), np.array([0]))
    with pytest.raises(ValueError, match="one non-empty shape"):
        clustered_coverage(np.array([]), np.array([]))
