"""The gate's decision procedure for one candidate arm, on per-slice counts (docs/gate.md).

Every input and output array has shape (..., S): S slices, with any leading axes (one report, or many
simulated runs at once — `kvgate simulate` runs exactly this code). Steps:

1. Tails: each slice's failure count k of n control passes is tested on its exact distribution at τ —
   binomial where every case is its own cluster, else the convolution of its clusters' beta-binomials
   at the ICC the policy's `defects` gives (stats.cluster_null; the run's own upper bound plus its
   error β with "estimate", Berger & Boos 1994). With "estimate" a clustered slice's FAIL p-value is
   instead the single cases' exact tail over the clusters' betting e-value (stats.betting), valid for
   any dependence inside a cluster. With `sequential = "anytime"`, 1/E of mixture e-processes
   (stats.eprocess) instead.
2. FAIL. Each slice's exceedance p-value P_τ(S ≥ k) is tested by weighted Holm at α = 1 − confidence
   over every slice that can reach α at all (P_τ(S = n) < α; the others cannot fail and are left out,
   as Tarone (1990) leaves out discrete tests that cannot reach significance). The gated family —
   `all`, critical slices, slices with their own τ and every value of a strata column — shares
   1 − signal_alpha of the weight, the signals signal_alpha; a rejected slice's weight passes on. A
   rejection fails its slice only when the candidate is also worse than the A/A replicate on the same
   control passes (one-sided unconditional exact test on the 2×2 table, Suissa & Shuster 1991, p <
   aa_alpha, and CFR − A/A CFR > aa_margin); without a replicate that check is skipped. The check
   only holds FAILs back, so the family-wise error rate of "fail" at CFR ≤ τ is ≤ α for the whole arm
   whatever aa_alpha is. min_control_passes does not hold a FAIL back.
3. PASS (gated slices only): P_τ(S ≤ k) ≤ α — the exact upper bound is ≤ τ — and n ≥ min_control_passes.
   The arm passes only when every gated slice does (an intersection–union test: no correction needed to
   keep the false-accept rate ≤ α).
4. Signals are flagged when their Benjamini–Hochberg q-value is ≤ α: a pointer for review, no verdict.
5. The arm: any slice fails → FAIL; the A/A replicate's CFR on `all` above τ by its lower bound →
   INCONCLUSIVE (the engine's own noise is above the limit); every gated slice passes → PASS; else
   INCONCLUSIVE.

Rule "point" (an unsafe policy) replaces 2–3 on gated slices by the estimate against τ; signals never fail.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvgate.gate.counts import Clusters, SliceCounts
from kvgate.gate.decision import FAIL, INCONCLUSIVE, PASS
from kvgate.gate.policy import Policy
from kvgate.gate.tails import NUISANCE_SHARE, clustered_bounds, slice_tails, sum_of_squares
from kvgate.stats.cluster_null import design_effect
from kvgate.stats.intervals import cp_bounds
from kvgate.stats.multiplicity import benjamini_hochberg, weighted_holm
from kvgate.stats.unconditional import paired_worse_pvalue

__all__ = ["NUISANCE_SHARE", "Clusters", "Family", "SliceCounts", "Verdicts", "decide_arm"]

# Why a slice got its decision (see `slice_reason` in analysis.slice_stats for the words).
WHY_PASS, WHY_FAIL, WHY_INSIDE, WHY_FEW, WHY_NOT_ABOVE_AA, WHY_MARGIN, WHY_EMPTY, WHY_POINT = range(8)


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
    """One-sided exact p of candidate worse than A/A replicate (paired); NaN where not computed."""
    q: np.ndarray
    """Benjamini–Hochberg q-value among the signals; NaN for gated slices."""
    flagged: np.ndarray
    k_eff: np.ndarray
    n_eff: np.ndarray
    arm: np.ndarray
    """PASS, FAIL or INCONCLUSIVE per leading index."""
    noisy: np.ndarray
    """Per leading index: the A/A noise floor of `all` is above its τ (its lower bound is)."""
    below_p: np.ndarray
    """P(S ≤ k) at τ (plus β where clustered): a gated slice passes when it is ≤ α."""
    rho: np.ndarray
    """Per leading index: the ICC clustered slices were tested at."""
    design_effect: np.ndarray
    """Kish's design effect at that ICC, 1 where every case is single."""
    clustered: np.ndarray
    """Whether the slice has a cluster of more than one control pass."""


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


def paired_aa_pvalue(candidate_only: np.ndarray, replicate_only: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """One-sided exact test that the candidate fails more of the control's passes than the A/A replicate,
    on the 2×2 table of the `pairs` control passes both judged: the unconditional exact test of Suissa &
    Shuster (1991) on the discordant counts b (candidate only) and c (replicate only); 1 when b ≤ c."""
    return paired_worse_pvalue(candidate_only, replicate_only, pairs)


def decide_arm(counts: SliceCounts, family: Family, policy: Policy, with_bounds: bool = True) -> Verdicts:
    """Steps 1–5 of the module docstring, for every leading index at once.

    with_bounds=False leaves every slice's lower and upper bounds NaN (the exact beta quantiles and the
    clustered slices' bisections; the decisions do not need them): what a simulation asks for.
    """
    k = np.asarray(counts.failures, dtype=np.int64)
    n = np.asarray(counts.control_passes, dtype=np.int64)
    tau = np.broadcast_to(np.asarray(family.tau, dtype=float), k.shape)
    gated = np.broadcast_to(np.asarray(family.gated, dtype=bool), k.shape)
    alpha = policy.alpha
    tails = slice_tails(counts, tau, policy, family.all_index)
    rho_slice = np.where(tails.clustered, np.asarray(tails.rho)[..., None], 0.0)
    squares = sum_of_squares(counts, k.shape)
    deff = design_effect(squares, n, rho_slice)
    with np.errstate(invalid="ignore", divide="ignore"):
        n_eff = np.where(n > 0, n / deff, 0.0)
        k_eff = np.where(n > 0, k / deff, 0.0)
    if with_bounds:
        lower, upper = cp_bounds(np.minimum(k, n), n, policy.confidence)
        if tails.clustered.any():
            lower, upper = clustered_bounds(counts, tails, lower, upper, alpha)
    else:
        lower = upper = np.full(k.shape, np.nan)
    exceed = tails.exceed
    reachable = (n > 0) & (tails.smallest < alpha)
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
        pass_test = gated & (n > 0) & (tails.below <= alpha)
    why = np.full(k.shape, WHY_INSIDE, dtype=np.int64)
    aa_p = np.full(k.shape, np.nan)
    fails = fail_test.copy()
    if counts.aa_failures is not None and counts.aa_passes is not None:
        ka = np.asarray(counts.aa_failures, dtype=np.int64)
        na = np.asarray(counts.aa_passes, dtype=np.int64)
        has_aa = na > 0
        b = counts.aa_candidate_only
        c = counts.aa_replicate_only
        if b is None or c is None:  # no joint table: every replicate failure counted as discordant
            b, c = k, ka
        aa_p = np.where(has_aa, paired_aa_pvalue(b, c, np.maximum(na, np.add(b, c))), np.nan)
        tested = fail_test & has_aa
        with np.errstate(invalid="ignore", divide="ignore"):
            aa_cfr = np.where(has_aa, ka / np.maximum(na, 1), 0.0)
        above_aa = ~tested | (aa_p < policy.aa_alpha)
        beyond_margin = ~tested | (cfr - aa_cfr > policy.aa_margin)
        why = np.where(fail_test & ~above_aa, WHY_NOT_ABOVE_AA, why)
        why = np.where(fail_test & above_aa & ~beyond_margin, WHY_MARGIN, why)
        fails = fail_test & above_aa & beyond_margin
        i = family.all_index
        aa_lower, _ = cp_bounds(np.minimum(ka[..., i], na[..., i]), na[..., i], policy.confidence)
        noisy = has_aa[..., i] & (np.nan_to_num(aa_lower, nan=0.0) > tau[..., i])
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
        below_p=tails.below,
        rho=np.asarray(tails.rho),
        design_effect=deff,
        clustered=tails.clustered,
    )
