"""Each slice's exact tail p-values at its τ (docs/gate.md, "Clusters"): binomial where every case is
single, the convolution of its clusters' beta-binomials otherwise (stats.cluster_null), or anytime-valid
mixture e-values with `sequential = "anytime"` (stats.eprocess); and the bounds that invert them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import bdtr

from kvgate.errors import BadInput
from kvgate.gate.counts import SliceCounts
from kvgate.gate.policy import Policy
from kvgate.stats.betting import fail_lower_bound, fail_pvalue, smallest_fail_pvalue
from kvgate.stats.cluster_null import bounds, grouped_tails, icc_upper
from kvgate.stats.eprocess import all_failed_e_value, e_values
from kvgate.stats.tests import exceed_pvalue

NUISANCE_SHARE = 0.1
"""β, the error of the ICC's upper bound with `defects = "estimate"`, as a share of α."""


@dataclass(frozen=True)
class Tails:
    """The exact tail p-values of each slice's failure count at its τ, shape (..., S)."""

    exceed: np.ndarray
    """P(S ≥ k): small when the slice is above τ (the FAIL test)."""
    below: np.ndarray
    """P(S ≤ k): small when the slice is below τ (the PASS test)."""
    smallest: np.ndarray
    """P(S = n): the smallest exceedance p-value the slice can give."""
    rho: np.ndarray
    """(...,) the ICC the clustered slices were tested at."""
    nuisance: np.ndarray
    """(..., S) the share of α the ICC's bound spent (β; 0 where the slice has no multi-case cluster)."""
    clustered: np.ndarray
    """(..., S) whether the slice has a cluster of more than one control pass."""
    betting: bool = False
    """Whether clustered slices' FAIL p-values come from stats.betting (`defects = "estimate"`), so they
    spend no β and their lower bounds invert that test."""


def slice_tails(counts: SliceCounts, tau: np.ndarray, policy: Policy, all_index: int) -> Tails:
    """Exact tails per slice (stats.cluster_null): binomial where every case is single, else the
    convolution of the clusters' beta-binomials at the ICC the policy's `defects` says (0 per case, 1 per
    cluster, or the run's own upper bound plus its error β, the Berger–Boos correction)."""
    k = np.asarray(counts.failures, dtype=np.int64)
    n = np.asarray(counts.control_passes, dtype=np.int64)
    if policy.anytime:
        return _anytime_tails(counts, tau, policy)
    exceed = exceed_pvalue(k, n, tau)
    below = np.where(k >= n, 1.0, bdtr(k, np.maximum(n, 1), tau))
    smallest = np.asarray(tau, dtype=float) ** n
    lead = k.shape[:-1]
    rho = np.zeros(lead)
    nuisance = np.zeros(k.shape)
    clustered = np.zeros(k.shape, dtype=bool)
    grouped = counts.grouped
    if grouped is None or policy.defects == "per_case" or grouped.slice_of.size == 0:
        return Tails(exceed, below, smallest, rho, nuisance, clustered)
    size = np.broadcast_to(grouped.size, (*lead, grouped.slice_of.size))
    beta = policy.alpha * NUISANCE_SHARE if policy.defects == "estimate" else 0.0
    if policy.defects == "estimate":
        in_all = grouped.slice_of == all_index
        rho = np.asarray(icc_upper(grouped.failed[..., in_all], size[..., in_all], beta), dtype=float)
        rho = np.broadcast_to(rho, lead)
    else:
        rho = np.ones(lead)
    flat = int(np.prod(lead, dtype=np.int64))
    k2, n2 = k.reshape(flat, -1), n.reshape(flat, -1)
    size2, rho2 = size.reshape(flat, -1), np.asarray(rho).reshape(flat)
    exceed2, below2, smallest2 = (a.reshape(flat, -1).copy() for a in (exceed, below, smallest))
    clustered2 = clustered.reshape(flat, -1)
    tau2 = np.broadcast_to(tau, k.shape).reshape(flat, -1)
    for s in np.unique(grouped.slice_of):
        slots = size2[:, grouped.slice_of == s]
        rows = np.flatnonzero((slots >= 2).any(axis=1) & (n2[:, s] > 0))
        if rows.size == 0:
            continue
        for t in np.unique(tau2[rows, s]):
            sub = rows[tau2[rows, s] == t]
            ge, le, top = grouped_tails(k2[sub, s], n2[sub, s], slots[sub], float(t), rho2[sub])
            exceed2[sub, s], below2[sub, s], smallest2[sub, s] = ge, le, top
        clustered2[rows, s] = True
    clustered = clustered2.reshape(k.shape)
    nuisance = np.where(clustered, beta, 0.0)
    exceed, smallest = exceed2.reshape(k.shape), smallest2.reshape(k.shape)
    betting = policy.defects == "estimate"
    if betting:
        exceed, smallest = _betting_exceed(counts, tau, clustered, exceed, smallest)
    fail_nuisance = 0.0 if betting else nuisance
    return Tails(
        np.minimum(1.0, exceed + fail_nuisance),
        np.minimum(1.0, below2.reshape(k.shape) + nuisance),
        np.minimum(1.0, smallest + fail_nuisance),
        np.asarray(rho),
        nuisance,
        clustered,
        betting,
    )


def _betting_exceed(
    counts: SliceCounts, tau: np.ndarray, clustered: np.ndarray, exceed: np.ndarray, smallest: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The FAIL p-values of clustered slices under `defects = "estimate"` (stats.betting): the singles'
    exact tail over the clusters' betting e-value, valid whatever the dependence inside a cluster."""
    grouped = counts.grouped
    assert grouped is not None
    k = np.asarray(counts.failures, dtype=np.int64)
    n = np.asarray(counts.control_passes, dtype=np.int64)
    size = np.broadcast_to(np.asarray(grouped.size, dtype=np.int64), (*k.shape[:-1], grouped.slice_of.size))
    failed = np.broadcast_to(np.asarray(grouped.failed, dtype=np.int64), size.shape)
    exceed, smallest = exceed.copy(), smallest.copy()
    for s in np.unique(grouped.slice_of):
        rows = clustered[..., s]
        if not rows.any():
            continue
        slots = grouped.slice_of == s
        m, t = size[..., slots][rows], failed[..., slots][rows]
        multi = m >= 2
        n_single = n[..., s][rows] - np.where(multi, m, 0).sum(axis=-1)
        k_single = k[..., s][rows] - np.where(multi, t, 0).sum(axis=-1)
        t_s = np.broadcast_to(tau, k.shape)[..., s][rows]
        exceed[..., s][rows] = fail_pvalue(k_single, n_single, t, m, t_s)
        smallest[..., s][rows] = smallest_fail_pvalue(n_single, m, t_s)
    return exceed, smallest


def _anytime_tails(counts: SliceCounts, tau: np.ndarray, policy: Policy) -> Tails:
    """1/E of the mixture e-processes (stats.eprocess) as anytime-valid p-values. They assume independent
    cases: a slice with a multi-case cluster needs `defects = "per_case"` (or `cluster = "none"`)."""
    k = np.asarray(counts.failures, dtype=np.int64)
    n = np.asarray(counts.control_passes, dtype=np.int64)
    grouped = counts.grouped
    if grouped is not None and policy.defects != "per_case" and (np.asarray(grouped.size) >= 2).any():
        raise BadInput(
            'sequential = "anytime" needs independent cases, and this workload has multi-case clusters: '
            'set cluster = "none" or defects = "per_case" in the policy, or use sequential = true (looks)'
        )
    e_fail, e_pass = e_values(k, n, tau)
    top = all_failed_e_value(n, tau)
    zeros = np.zeros(k.shape)
    with np.errstate(divide="ignore"):
        return Tails(
            np.minimum(1.0, 1.0 / e_fail), np.minimum(1.0, 1.0 / e_pass), np.minimum(1.0, 1.0 / top),
            np.zeros(k.shape[:-1]), zeros, zeros.astype(bool),
        )  # fmt: skip


def sum_of_squares(counts: SliceCounts, shape: tuple[int, ...]) -> np.ndarray:
    """Σ m² over each slice's clusters (single cases add 1 each), shape (..., S)."""
    n = np.asarray(counts.control_passes, dtype=float)
    grouped = counts.grouped
    if grouped is None or grouped.slice_of.size == 0:
        return n
    size = np.broadcast_to(np.asarray(grouped.size, dtype=float), (*shape[:-1], grouped.slice_of.size))
    multi = np.where(size >= 2, size, 0.0)
    onehot = np.zeros((grouped.slice_of.size, shape[-1]))
    onehot[np.arange(grouped.slice_of.size), grouped.slice_of] = 1.0
    return n - multi @ onehot + (multi**2) @ onehot


def clustered_bounds(
    counts: SliceCounts, tails: Tails, lower: np.ndarray, upper: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """The exact bounds of clustered slices at error α − β each; with betting FAIL tests, the lower bound
    inverts that test at error α."""
    lower, upper = lower.astype(float).copy(), upper.astype(float).copy()
    lower[tails.clustered], upper[tails.clustered] = np.nan, np.nan
    grouped = counts.grouped
    if grouped is None:
        return lower, upper
    k = np.asarray(counts.failures, dtype=np.int64)
    n = np.asarray(counts.control_passes, dtype=np.int64)
    size = np.broadcast_to(grouped.size, (*k.shape[:-1], grouped.slice_of.size))
    rho = np.broadcast_to(tails.rho, k.shape[:-1])
    failed = np.broadcast_to(grouped.failed, size.shape)
    for index in zip(*np.nonzero(tails.clustered), strict=True):
        lead, s = index[:-1], index[-1]
        slots = size[lead][grouped.slice_of == s]
        sizes = tuple(sorted(int(m) for m in slots if m >= 2))
        singles = int(n[index]) - sum(sizes)
        level = alpha - float(tails.nuisance[index])
        lower[index], upper[index] = bounds(int(k[index]), sizes, singles, float(rho[lead]), level)
        if tails.betting:
            fails = failed[lead][grouped.slice_of == s]
            k_single = int(k[index]) - int(fails[slots >= 2].sum())
            lower[index] = fail_lower_bound(k_single, singles, fails, slots, alpha)
    return lower, upper
