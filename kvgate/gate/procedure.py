"""The gate's decision procedure for one candidate arm, on per-slice counts (docs/gate.md).

Every input and output array has shape (..., S): S slices, with any leading axes (one report, or many
simulated runs at once — `kvgate simulate` runs exactly this code). Steps:

1. Effective counts: k failures and n control passes in G clusters count as k·G/n of G (stats.clusters).
2. FAIL. Each slice's exceedance p-value, P(Binomial(G, τ) ≥ k_eff), is tested by weighted Holm at
   α = 1 − confidence over every slice that can reach α at all (τ^G < α; the others cannot fail and are
   left out, as Tarone (1990) leaves out discrete tests that cannot reach significance). The gated family
   — `all`, critical slices and slices with their own τ — shares 1 − signal_alpha of the weight, the
   signal slices share signal_alpha. A rejection fails its slice only when the candidate is also worse
   than the A/A replicate on the same slice (one-sided Fisher p < α, and CFR − A/A CFR > aa_margin);
   without a replicate that check is skipped. Only more evidence can fail: min_control_passes does not
   hold a FAIL back. The family-wise error rate of "fail" is ≤ α for the whole arm.
3. PASS (gated slices only): the exact upper bound on effective counts is ≤ τ and n ≥ min_control_passes.
   The arm passes only when every gated slice does (an intersection–union test: no correction needed to
   keep the false-accept rate ≤ α).
4. Signals are flagged when their Benjamini–Hochberg q-value is ≤ α: a pointer for review, no verdict.
5. The arm: any slice fails → FAIL; the A/A noise floor of `all` above its τ → INCONCLUSIVE (the engine's
   own noise is above the limit); every gated slice passes → PASS; else INCONCLUSIVE.

Rule "point" (an unsafe policy) replaces 2–3 on gated slices by the estimate against τ; signals never fail.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvgate.gate.decision import FAIL, INCONCLUSIVE, PASS
from kvgate.gate.policy import Policy
from kvgate.stats.clusters import effective_counts
from kvgate.stats.intervals import effective_bounds
from kvgate.stats.multiplicity import benjamini_hochberg, weighted_holm
from kvgate.stats.tests import effective_exceed_pvalue, fisher_greater

# Why a slice got its decision (see `slice_reason` in report.slice_stats for the words).
WHY_PASS, WHY_FAIL, WHY_INSIDE, WHY_FEW, WHY_NOT_ABOVE_AA, WHY_MARGIN, WHY_EMPTY, WHY_POINT = range(8)


@dataclass(frozen=True)
class SliceCounts:
    """One arm's counts per slice, arrays of shape (..., S)."""

    failures: np.ndarray
    control_passes: np.ndarray
    clusters: np.ndarray
    """Distinct clusters among the control passes (= control_passes without clustering)."""
    aa_failures: np.ndarray | None = None
    """Control passes the A/A replicate fails; None when the run has no replicate."""
    aa_passes: np.ndarray | None = None
    """Control passes with a replicate verdict."""


@dataclass(frozen=True)
class Family:
    """The slices' roles, shape (S,): their τ and whether they gate (else they are signals)."""

    tau: np.ndarray
    gated: np.ndarray
    all_index: int = 0


@dataclass(frozen=True)
class Verdicts:
    codes: np.ndarray
    """PASS, FAIL or INCONCLUSIVE per slice."""
    why: np.ndarray
    """WHY_* per slice."""
    lower: np.ndarray
    upper: np.ndarray
    exceed_p: np.ndarray
    adjusted_p: np.ndarray
    """Weighted-Holm adjusted exceedance p-value; NaN where the slice cannot reach α (left out)."""
    level: np.ndarray
    """The slice's first-step share of α: α·w / (total weight); 0 where left out."""
    aa_p: np.ndarray
    """One-sided Fisher p of candidate worse than A/A replicate; NaN where not computed."""
    q: np.ndarray
    """Benjamini–Hochberg q-value among the signals; NaN for gated slices."""
    flagged: np.ndarray
    k_eff: np.ndarray
    n_eff: np.ndarray
    arm: np.ndarray
    """PASS, FAIL or INCONCLUSIVE per leading index."""
    noisy: np.ndarray
    """Per leading index: the A/A noise floor of `all` is above its τ."""


def weights(family: Family, reachable: np.ndarray, signal_alpha: float) -> np.ndarray:
    """Holm weights, shape (..., S): gated slices share 1 − signal_alpha, signals signal_alpha, each
    equally among those that can reach α. A role with no reachable slice leaves its share to the other."""
    gated = np.broadcast_to(family.gated, reachable.shape)
    n_gated = (reachable & gated).sum(axis=-1, keepdims=True)
    n_signal = (reachable & ~gated).sum(axis=-1, keepdims=True)
    share_g = np.where(n_signal > 0, 1.0 - signal_alpha, 1.0)
    share_s = np.where(n_gated > 0, signal_alpha, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(gated, share_g / np.maximum(n_gated, 1), share_s / np.maximum(n_signal, 1))
    return np.where(reachable, w, 0.0)


def arm_codes(codes: np.ndarray, gated: np.ndarray, noisy: np.ndarray) -> np.ndarray:
    """The arm's decision from its slices' (step 5)."""
    any_fail = (codes == FAIL).any(axis=-1)
    all_pass = np.where(np.broadcast_to(gated, codes.shape), codes == PASS, True).all(axis=-1)
    return np.where(any_fail, FAIL, np.where(noisy, INCONCLUSIVE, np.where(all_pass, PASS, INCONCLUSIVE)))


def decide_arm(counts: SliceCounts, family: Family, policy: Policy) -> Verdicts:
    """Steps 1–5 of the module docstring, for every leading index at once."""
    k = np.asarray(counts.failures, dtype=np.int64)
    n = np.asarray(counts.control_passes, dtype=np.int64)
    tau = np.broadcast_to(np.asarray(family.tau, dtype=float), k.shape)
    gated = np.broadcast_to(np.asarray(family.gated, dtype=bool), k.shape)
    alpha = policy.alpha
    k_eff, n_eff = effective_counts(k, n, counts.clusters)
    lower, upper = effective_bounds(k_eff, n_eff, policy.confidence)
    exceed = effective_exceed_pvalue(k_eff, n_eff, tau)
    reachable = (n > 0) & (effective_exceed_pvalue(n_eff, n_eff, tau) < alpha)
    signal_alpha = policy.signal_alpha if policy.rule == "upper_bound" else 0.0
    w = weights(family, reachable, signal_alpha)
    adjusted = weighted_holm(np.where(reachable, exceed, np.nan), w)
    total = w.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        level = np.where(total > 0, alpha * w / np.where(total > 0, total, 1.0), 0.0)
        cfr = np.where(n > 0, k / np.maximum(n, 1), np.nan)
    if policy.rule == "point":
        fail_test = gated & (n > 0) & (cfr > tau)
        pass_test = gated & (n > 0) & (cfr <= tau)
    else:
        fail_test = np.nan_to_num(adjusted, nan=1.0) <= alpha
        pass_test = gated & (upper <= tau)
    why = np.full(k.shape, WHY_INSIDE, dtype=np.int64)
    aa_p = np.full(k.shape, np.nan)
    fails = fail_test.copy()
    if counts.aa_failures is not None and counts.aa_passes is not None:
        ka = np.asarray(counts.aa_failures, dtype=np.int64)
        na = np.asarray(counts.aa_passes, dtype=np.int64)
        has_aa = na > 0
        tested = fail_test & has_aa
        if tested.any():
            aa_p[tested] = fisher_greater(k[tested], n[tested], ka[tested], na[tested])
        with np.errstate(invalid="ignore", divide="ignore"):
            aa_cfr = np.where(has_aa, ka / np.maximum(na, 1), 0.0)
        above_aa = ~tested | (aa_p < alpha)
        beyond_margin = ~tested | (cfr - aa_cfr > policy.aa_margin)
        why = np.where(fail_test & ~above_aa, WHY_NOT_ABOVE_AA, why)
        why = np.where(fail_test & above_aa & ~beyond_margin, WHY_MARGIN, why)
        fails = fail_test & above_aa & beyond_margin
        i = family.all_index
        noisy = has_aa[..., i] & (aa_cfr[..., i] > tau[..., i])
    else:
        noisy = np.zeros(k.shape[:-1], dtype=bool)
    enough = n >= policy.min_control_passes
    passes = pass_test & enough & ~fails
    why = np.where(pass_test & ~enough & ~fails, WHY_FEW, why)
    why = np.where(n == 0, WHY_EMPTY, why)
    why = np.where(passes, WHY_PASS, np.where(fails, WHY_FAIL, why))
    if policy.rule == "point":
        why = np.where(passes | fails, WHY_POINT, why)
    codes = np.where(passes, PASS, np.where(fails, FAIL, INCONCLUSIVE))
    q = benjamini_hochberg(np.where(gated | (n == 0), np.nan, exceed))
    return Verdicts(
        codes=codes,
        why=why,
        lower=lower,
        upper=upper,
        exceed_p=exceed,
        adjusted_p=adjusted,
        level=level,
        aa_p=aa_p,
        q=q,
        flagged=np.nan_to_num(q, nan=1.0) <= alpha,
        k_eff=k_eff,
        n_eff=n_eff,
        arm=arm_codes(codes, family.gated, noisy),
        noisy=noisy,
    )
