"""Per-slice statistics and decisions of one candidate arm (docs/gate.md).

For every slice: the paired counts, CFR with its one-sided exact bounds (on effective counts where cases
are clustered), the exceedance p-value and its weighted-Holm adjustment, the BH q-value of a signal,
McNemar's exact p-value, the candidate's total failure rate, the A/A replicate on the same cases, the
minimum detectable CFR and the control passes a PASS would need, and the decision of `gate.procedure`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kvgate.gate import procedure as proc
from kvgate.gate.decision import FAIL, NAMES
from kvgate.gate.policy import Policy
from kvgate.report.analysis.numbers import finite, ratio
from kvgate.report.analysis.slices import CRITICAL, SliceGroup, is_gated
from kvgate.report.document.slice import needed_clusters
from kvgate.stats.clusters import clusters_per_slice, multi_case_clusters
from kvgate.stats.paired import BOTH_PASS, CACHE_INDUCED, N_OUTCOMES, PairedCounts, grouped_counts
from kvgate.stats.power import min_detectable, passes_needed
from kvgate.stats.tests import mcnemar_pvalues


@dataclass(frozen=True)
class CaseSignals:
    """Per-case arrays one arm's slices are counted from.

    outcomes: pair outcome code (stats.paired) or −1; aa: A/A flip (1), agreement (0) or −1. Of the
    cache-induced failures: reproducible (every re-run with a verdict failed), flaky (a re-run passed),
    unconfirmed (no re-run gave a verdict, or the matrix asks for none). Reproducible and unconfirmed
    failures both count in critical slices: a failure is only excused once a re-run passes.
    """

    outcomes: np.ndarray
    aa: np.ndarray
    reproducible: np.ndarray
    flaky: np.ndarray
    unconfirmed: np.ndarray
    reruns_known: bool


REPRODUCIBLE, FLAKY, UNCONFIRMED = 1, 2, 3
"""Re-run classes of a cache-induced failure (0: not one)."""


def _case_codes(signals: CaseSignals) -> np.ndarray:
    """One small code per case: pair outcome (5 values, "no pair" included), A/A (3), re-run class (4)."""
    rerun = np.select(
        [signals.reproducible, signals.flaky, signals.unconfirmed], [REPRODUCIBLE, FLAKY, UNCONFIRMED], 0
    )
    return ((signals.outcomes.astype(np.int64) + 1) * 3 + (signals.aa + 1)) * 4 + rerun


def _tallies(groups: list[SliceGroup], signals: CaseSignals) -> np.ndarray:
    """Counts per slice × (outcome+1) × (A/A+1) × re-run class: one bincount per slice group."""
    codes = _case_codes(signals)
    width = (N_OUTCOMES + 1) * 3 * 4
    return np.concatenate([grouped_counts(g.codes, g.size, codes, width) for g in groups]).reshape(
        -1, N_OUTCOMES + 1, 3, 4
    )


def _aa_table(tally: np.ndarray) -> dict[str, int]:
    """The 2×2 table of the paired A/A test on the slice's control passes (candidate × replicate)."""
    pass_, fail = 1 + BOTH_PASS, 1 + CACHE_INDUCED
    agree, flip = 1, 2
    return {
        "both_pass": int(tally[pass_, agree].sum()),
        "candidate_only_fails": int(tally[fail, agree].sum()),
        "replicate_only_fails": int(tally[pass_, flip].sum()),
        "both_fail": int(tally[fail, flip].sum()),
    }


def _critical_reason(reproducible: int, unconfirmed: int, critical_arm: str | None) -> str:
    parts = [f"{reproducible} reproducible"] if reproducible else []
    parts += [f"{unconfirmed} unconfirmed"] if unconfirmed else []
    return f"{' + '.join(parts)} candidate-only failures in {critical_arm or 'a critical slice'}"


def slice_reason(why: int, row: dict[str, Any], policy: Policy) -> str:
    """The words for a slice's WHY_* code (gate.procedure), with the numbers behind it."""
    alpha = f"{policy.alpha:.3g}"
    if why == proc.WHY_PASS:
        return "upper bound ≤ τ"
    if why == proc.WHY_POINT:
        return "CFR ≤ τ (point rule)" if row["decision"] == "pass" else "CFR > τ (point rule)"
    if why == proc.WHY_FAIL:
        return f"lower bound > τ; adjusted p {row['adjusted_p']:.2g} ≤ α {alpha}"
    if why == proc.WHY_NOT_ABOVE_AA:
        return (
            f"CFR above τ but not above the A/A replicate's on the same control passes "
            f"(paired exact p {row['aa_p']:.2g} ≥ aa_alpha {policy.aa_alpha:g})"
        )
    if why == proc.WHY_MARGIN:
        return f"CFR above τ but within aa_margin {policy.aa_margin:g} of the A/A replicate's"
    if why == proc.WHY_EMPTY:
        return "no control passes"
    if why == proc.WHY_FEW:
        return f"{row['control_passes']} control passes < min {policy.min_control_passes}"
    return leaning_reason(row)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def clusters_needed(row: dict[str, Any]) -> int | None:
    """Distinct clusters a PASS would need at the slice row's CFR (report.document.slice.clusters_needed)."""
    return needed_clusters(
        row.get("passes_needed"),
        row.get("design_effect", 1.0),
        row.get("icc_upper"),
        row["control_passes"],
        row["clusters"],
    )


def leaning_reason(row: dict[str, Any]) -> str:
    """An inconclusive slice in words that say which way it leans: the point estimate above or below τ,
    the interval between its one-sided bounds, and whether more cases or more clusters would settle it.

    Above τ, only a lower bound past τ fails it (more failing cases); below τ, only an upper bound under
    τ passes it (≈`passes_needed` control passes at this CFR). When its control passes fall in fewer
    clusters than cases, the effective count is the clusters': more of them settle it, not more cases
    of the same clusters."""
    cfr, tau = row["cfr"] or 0.0, row["tau"]
    interval = f"interval {_pct(row['cfr_lower'])}–{_pct(row['cfr_upper'])}"
    n, g = row["control_passes"], row["clusters"]
    clustered = 0 < g < n
    settle = f"{'more clusters' if clustered else 'more cases'} would settle it"
    if clustered:
        settle += f" ({n} control passes in {g} cluster{'s' if g > 1 else ''})"
    if cfr > tau:
        return f"CFR {_pct(cfr)} above τ {_pct(tau)}, bound not yet significant ({interval}); {settle}"
    needed = row["passes_needed"]
    if needed and needed > 0:
        clusters = clusters_needed(row)
        if clustered and clusters is not None:
            settle += (
                f": a PASS needs ≈{clusters} distinct clusters at this CFR, has {g} "
                f"(ICC ≤ {row['icc_upper']:.2g}, design effect {row['design_effect']:.1f})"
            )
        elif not clustered or row.get("icc_upper") is not None:
            settle += f": a PASS needs ≈{needed} control passes at this CFR"
    side = "at" if cfr == tau else "below"
    return f"CFR {_pct(cfr)} {side} τ {_pct(tau)}, upper bound not yet under τ ({interval}); {settle}"


def slice_rows(
    arm: str,
    groups: list[SliceGroup],
    signals: CaseSignals,
    policy: Policy,
    critical_arm: str | None,
    clusters: np.ndarray,
) -> tuple[list[dict[str, Any]], bool]:
    """One dict per slice, in group order, and whether the A/A noise floor of `all` is above τ.

    `critical_arm`: why every slice is critical (lossless arms: any candidate-only failure fails).
    `clusters`: per case, its cluster code (analysis.slices.cluster_ids).
    """
    names = [n for g in groups for n in g.names]
    labels = [lab for g in groups for lab in g.labels]
    tallies = _tallies(groups, signals)
    outcome_counts = tallies.sum(axis=(2, 3))[:, 1:]
    rerun_counts = tallies.sum(axis=(1, 2))
    reproducible, flaky, unconfirmed = (rerun_counts[:, c] for c in (REPRODUCIBLE, FLAKY, UNCONFIRMED))
    passing = tallies[:, 1 + BOTH_PASS] + tallies[:, 1 + CACHE_INDUCED]  # (slice, A/A+1, re-run)
    aa_fail, aa_known = passing[:, 2].sum(axis=-1), passing[:, 1:].sum(axis=(1, 2))
    counts = [PairedCounts.from_outcome_counts(row) for row in outcome_counts]
    k = np.array([c.cache_induced_failures for c in counts], dtype=np.int64)
    n = np.array([c.control_passes for c in counts], dtype=np.int64)
    control_pass = (signals.outcomes == BOTH_PASS) | (signals.outcomes == CACHE_INDUCED)
    g = np.concatenate([clusters_per_slice(gr.codes, gr.size, clusters, control_pass) for gr in groups])
    offsets = np.cumsum([0, *(gr.size for gr in groups)])[:-1].tolist()
    slice_of, size, failed = multi_case_clusters(
        [gr.codes for gr in groups], offsets, clusters, control_pass, signals.outcomes == CACHE_INDUCED
    )
    grouped = proc.Clusters(slice_of, size, failed) if slice_of.size else None
    has_aa = bool((signals.aa >= 0).any())
    # discordant pairs among control passes: candidate fails and the replicate agrees with the control
    # (passes), or the candidate passes and the replicate flips (fails)
    aa_b = tallies[:, 1 + CACHE_INDUCED, 1].sum(axis=-1)
    aa_c = tallies[:, 1 + BOTH_PASS, 2].sum(axis=-1)
    gated = np.array([is_gated(name, policy) for name in names], dtype=bool)
    family = proc.Family(tau=np.array([policy.tau_for(name) for name in names]), gated=gated)
    aa: dict[str, Any] = {}
    if has_aa:
        aa = {
            "aa_failures": aa_fail,
            "aa_passes": aa_known,
            "aa_candidate_only": aa_b,
            "aa_replicate_only": aa_c,
        }
    v = proc.decide_arm(proc.SliceCounts(k, n, g, grouped=grouped, **aa), family, policy)
    mcnemar = [finite(p) for p in mcnemar_pvalues(k, np.array([c.candidate_only_passes for c in counts]))]
    deff = v.design_effect
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.where(n > 0, k / np.maximum(n, 1), 0.0)
    mde = min_detectable(n, v.n_eff, family.tau, v.level)
    needed = passes_needed(observed, family.tau, policy.confidence, deff, policy.min_control_passes)
    rows = []
    for i, (name, c) in enumerate(zip(names, counts, strict=True)):
        aa_pairs = int(aa_known[i])
        row: dict[str, Any] = {
            "arm": arm,
            "slice": name,
            "labels": labels[i],
            "role": "gate" if gated[i] else "signal",
            "n_pairs": c.n_pairs,
            "control_passes": c.control_passes,
            "cache_induced_failures": c.cache_induced_failures,
            "candidate_only_passes": c.candidate_only_passes,
            "both_fail": c.both_fail,
            "candidate_failures": c.candidate_failures,
            "cfr": c.cfr,
            "cfr_lower": finite(v.lower[i]),
            "cfr_upper": finite(v.upper[i]),
            "tau": float(family.tau[i]),
            "decision": NAMES[int(v.codes[i])],
            "reason": "",
            "critical": critical_arm is not None or name == CRITICAL or name in policy.critical,
            "gated": bool(gated[i]),
            "clusters": int(g[i]),
            "design_effect": float(deff[i]),
            "icc_upper": float(v.rho) if v.clustered[i] else None,
            "n_eff": float(v.n_eff[i]),
            "exceed_p": finite(v.exceed_p[i]),
            "adjusted_p": finite(v.adjusted_p[i]),
            "alpha_share": float(v.level[i]),
            "q_value": finite(v.q[i]),
            "flagged": bool(v.flagged[i]),
            "aa_p": finite(v.aa_p[i]),
            "mcnemar_p": mcnemar[i],
            "min_detectable_cfr": finite(mde[i]),
            "passes_needed": int(needed[i]) if needed[i] >= 0 else None,
            "total_failure_rate": c.total_failure_rate,
            "aa_pairs": aa_pairs,
            "aa_table": _aa_table(tallies[i]) if has_aa else None,
            "aa_flips": int(aa_fail[i]),
            "aa_flip_rate": ratio(int(aa_fail[i]), aa_pairs),
            "aa_cfr": ratio(int(aa_fail[i]), int(aa_known[i])) if has_aa else None,
            "reproducible_failures": int(reproducible[i]) if signals.reruns_known else None,
            "flaky_failures": int(flaky[i]) if signals.reruns_known else None,
        }
        row["reason"] = slice_reason(int(v.why[i]), row, policy)
        if critical_arm is not None and reproducible[i] + unconfirmed[i] > 0:
            row["decision"] = NAMES[FAIL]
            row["reason"] = _critical_reason(int(reproducible[i]), int(unconfirmed[i]), critical_arm)
        rows.append(row)
    return rows, bool(v.noisy)
