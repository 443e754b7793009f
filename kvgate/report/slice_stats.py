"""Per-slice statistics and decisions of one candidate arm (DESIGN.md, "Report JSON").

For every slice: the paired counts, CFR with its one-sided Clopper–Pearson bounds, McNemar's exact
p-value, the exact exceedance p-value, the candidate's total failure rate, the A/A flip rate on the same
cases, and the gate's decision, with Holm's correction across the arm's slices when the policy asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kvgate.gate.decision import NAMES, decide, reason
from kvgate.gate.policy import Policy
from kvgate.report.numbers import finite, ratio
from kvgate.report.slices import CRITICAL, SliceGroup
from kvgate.stats.intervals import cp_bounds
from kvgate.stats.paired import N_OUTCOMES, PairedCounts, grouped_counts
from kvgate.stats.tests import exceed_pvalue, holm, mcnemar_pvalues


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


def _critical_reason(reproducible: int, unconfirmed: int, critical_arm: str | None) -> str:
    parts = [f"{reproducible} reproducible"] if reproducible else []
    parts += [f"{unconfirmed} unconfirmed"] if unconfirmed else []
    return f"{' + '.join(parts)} candidate-only failures in {critical_arm or 'a critical slice'}"


def slice_rows(
    arm: str, groups: list[SliceGroup], signals: CaseSignals, policy: Policy, critical_arm: str | None
) -> list[dict[str, Any]]:
    """One dict per slice, in group order. `critical_arm`: why every slice is critical (lossless arms)."""
    names = [n for g in groups for n in g.names]
    labels = [lab for g in groups for lab in g.labels]
    tallies = _tallies(groups, signals)
    outcome_counts = tallies.sum(axis=(2, 3))[:, 1:]
    aa_counts = tallies.sum(axis=(1, 3))[:, 1:]
    rerun_counts = tallies.sum(axis=(1, 2))
    reproducible, flaky, unconfirmed = (rerun_counts[:, c] for c in (REPRODUCIBLE, FLAKY, UNCONFIRMED))
    counts = [PairedCounts.from_outcome_counts(row) for row in outcome_counts]
    k = np.array([c.cache_induced_failures for c in counts], dtype=np.int64)
    n = np.array([c.control_passes for c in counts], dtype=np.int64)
    tau = np.array([policy.tau_for(name) for name in names])
    lower, upper = cp_bounds(k, n, policy.confidence)
    exceed = exceed_pvalue(k, n, tau)
    mcnemar = [finite(p) for p in mcnemar_pvalues(k, np.array([c.candidate_only_passes for c in counts]))]
    exceed_holm = mcnemar_holm = None
    fail_p = None
    if policy.holm:
        exceed_holm = holm([finite(p) for p in exceed])
        mcnemar_holm = holm(mcnemar)
        fail_p = np.array([np.nan if p is None else p for p in exceed_holm])
    codes = decide(k, n, tau, policy, fail_p if policy.rule == "upper_bound" else None)
    rows = []
    for i, (name, c) in enumerate(zip(names, counts, strict=True)):
        code = int(codes[i])
        decision, why = (
            NAMES[code],
            reason(code, c.cache_induced_failures, c.control_passes, policy, fail_p is not None),
        )
        critical = critical_arm is not None or name == CRITICAL or name in policy.critical
        if critical and reproducible[i] + unconfirmed[i] > 0:
            decision, why = "fail", _critical_reason(int(reproducible[i]), int(unconfirmed[i]), critical_arm)
        aa_pairs = int(aa_counts[i].sum())
        row: dict[str, Any] = {
            "arm": arm,
            "slice": name,
            "labels": labels[i],
            "n_pairs": c.n_pairs,
            "control_passes": c.control_passes,
            "cache_induced_failures": c.cache_induced_failures,
            "candidate_only_passes": c.candidate_only_passes,
            "both_fail": c.both_fail,
            "candidate_failures": c.candidate_failures,
            "cfr": c.cfr,
            "cfr_lower": finite(lower[i]),
            "cfr_upper": finite(upper[i]),
            "tau": float(tau[i]),
            "decision": decision,
            "reason": why,
            "critical": critical,
            "gated": name == "all" or name in policy.named_slices,
            "mcnemar_p": mcnemar[i],
            "exceed_p": finite(exceed[i]),
            "total_failure_rate": c.total_failure_rate,
            "aa_pairs": aa_pairs,
            "aa_flips": int(aa_counts[i, 1]),
            "aa_flip_rate": ratio(int(aa_counts[i, 1]), aa_pairs),
            "reproducible_failures": int(reproducible[i]) if signals.reruns_known else None,
            "flaky_failures": int(flaky[i]) if signals.reruns_known else None,
        }
        if exceed_holm is not None and mcnemar_holm is not None:
            row["exceed_p_holm"] = exceed_holm[i]
            row["mcnemar_p_holm"] = mcnemar_holm[i]
        rows.append(row)
    return rows
