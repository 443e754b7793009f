"""Coverage of replay cells with an interval that counts what is independent.

Cells are not independent draws: every step and query head of one (case, layer, key head) is bounded
from the same sample of that head's dropped entries, so a sample that misses a heavy entry misses it in
all of them. Coverage p̂ = Σ y_i / n (y_i the cell's covered share of draws, 0 or 1 with one draw) gets
the cluster-robust variance of a ratio mean, v = G/(G − 1) · Σ_c (Y_c − p̂ n_c)² / n² over the G
clusters (Y_c, n_c each cluster's covered sum and cell count; Cochran 1977, "Sampling Techniques",
§6.11), and its design effect deff = v / (p̂ (1 − p̂) / n), at least 1. The interval is the exact
(Clopper–Pearson) one on the effective counts n / deff and p̂ n / deff (Korn & Graubard 1998, as
stats.clusters does for CFR), each side at (1 + confidence)/2. When every cell is covered (or none)
the variance says nothing about the correlation, and the worst case is taken: G effective draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvgate.stats.intervals import effective_bounds


@dataclass(frozen=True)
class Coverage:
    """share: covered share of the cells; lower, upper: its two-sided interval; cells, clusters: counts;
    design_effect: the variance inflation over independent cells the interval rests on."""

    share: float
    lower: float
    upper: float
    cells: int
    clusters: int
    design_effect: float


def clustered_coverage(covered: np.ndarray, clusters: np.ndarray, confidence: float = 0.95) -> Coverage:
    """covered: per cell, its covered share in [0, 1]; clusters: per cell, an integer code of the sample
    it was bounded from (e.g. case, layer, key head); both of shape [cells], cells ≥ 1."""
    y = np.asarray(covered, dtype=float)
    codes = np.asarray(clusters)
    if y.shape != codes.shape or y.ndim != 1 or y.size == 0:
        raise ValueError(f"covered and clusters must be 1-D of one non-empty shape: {y.shape}, {codes.shape}")
    if np.any((y < 0) | (y > 1)):
        raise ValueError("covered shares must be in [0, 1]")
    n = y.size
    _, inverse = np.unique(codes, return_inverse=True)
    per_cluster = np.bincount(inverse, weights=y)
    sizes = np.bincount(inverse).astype(float)
    g = per_cluster.size
    share = float(y.sum() / n)
    independent = share * (1.0 - share) / n
    if independent <= 0.0 or g < 2:
        deff = n / g
    else:
        clustered = g / (g - 1) * float(np.square(per_cluster - share * sizes).sum()) / n**2
        deff = max(1.0, clustered / independent)
    n_eff = n / deff
    lower, upper = effective_bounds(np.array(share * n_eff), np.array(n_eff), (1.0 + confidence) / 2.0)
    return Coverage(share, float(lower), float(upper), n, g, float(deff))
