"""Two runs' reports side by side, for nightly regressions: the same arms and slices, CFR deltas and
decision changes (`kvgate report RUN --compare BASELINE`). Reads only the two report models.

A slice regressed when its decision got worse, or when it gates and its CFR rose significantly: the
one-sided Fisher exact test of the current cache-induced failures against the baseline's (each over its
control passes), Holm-adjusted across the arm's gated slices, at the current policy's α. Runs of
different workloads, models or engines are not comparable unless the caller says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvgate.errors import BadInput
from kvgate.report.analysis.numbers import finite
from kvgate.report.document.arm import Arm
from kvgate.report.document.compare import Compare
from kvgate.report.document.report import Report
from kvgate.report.document.slice import Slice
from kvgate.stats.tests import fisher_greater, holm

SEVERITY = {"pass": 0, "inconclusive": 1, "error": 2, "fail": 3}
"""How bad a decision is: moving up this scale is a regression."""
RUN_KEYS = ("workload_sha256", "model", "engine", "policy_sha256", "n_cases")
COMPARABLE = ("workload_sha256", "model", "engine")
"""Runs that differ in these are refused unless allowed."""


def _run(report: Report) -> dict[str, Any]:
    return {
        "run_id": report.run.run_id,
        "git_commit": report.run.git_commit,
        "decision": report.decision,
        "exit_code": report.exit_code,
    }


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _change(current: str | None, baseline: str | None) -> str:
    if current is None or baseline is None:
        return "new" if baseline is None else "removed"
    if current == baseline:
        return "same"
    return "regression" if SEVERITY[current] > SEVERITY[baseline] else "improvement"


def compare_slice(cur: Slice | None, base: Slice | None) -> dict[str, Any]:
    some = cur or base
    assert some is not None

    def get(s: Slice | None, key: str) -> Any:
        return None if s is None else getattr(s, key)

    return {
        "slice": some.slice,
        "cache_induced_failures": get(cur, "cache_induced_failures"),
        "control_passes": get(cur, "control_passes"),
        "baseline_cache_induced_failures": get(base, "cache_induced_failures"),
        "baseline_control_passes": get(base, "control_passes"),
        "cfr": get(cur, "cfr"),
        "baseline_cfr": get(base, "cfr"),
        "cfr_delta": _delta(get(cur, "cfr"), get(base, "cfr")),
        "cfr_upper": get(cur, "cfr_upper"),
        "baseline_cfr_upper": get(base, "cfr_upper"),
        "cfr_upper_delta": _delta(get(cur, "cfr_upper"), get(base, "cfr_upper")),
        "decision": get(cur, "decision"),
        "baseline_decision": get(base, "decision"),
        "change": _change(get(cur, "decision"), get(base, "decision")),
        "gated": bool(cur is not None and cur.gated),
        "rise_p": _rise_p(cur, base),
        "rise_p_holm": None,
    }


def _rise_p(cur: Slice | None, base: Slice | None) -> float | None:
    """One-sided Fisher p that the current CFR exceeds the baseline's; None without both counts."""
    if cur is None or base is None or not cur.control_passes or not base.control_passes:
        return None
    p = fisher_greater(
        np.array([cur.cache_induced_failures]), np.array([cur.control_passes]),
        np.array([base.cache_induced_failures]), np.array([base.control_passes]),
    )  # fmt: skip
    return finite(p[0])


def mark_rises(slices: list[dict[str, Any]], alpha: float) -> None:
    """Holm-adjust the rise p-values of the gated slices and mark significant rises as regressions."""
    gated = [s for s in slices if s["gated"]]
    for s, adjusted in zip(gated, holm([s["rise_p"] for s in gated]), strict=True):
        s["rise_p_holm"] = adjusted
        if adjusted is not None and adjusted <= alpha and s["change"] in ("same", "improvement"):
            s["change"] = "regression"


def compare_arm(cur: Arm | None, base: Arm | None, alpha: float = 0.05) -> dict[str, Any]:
    some = cur or base
    assert some is not None
    cur_slices = {s.slice: s for s in ([] if cur is None else cur.slices)}
    base_slices = {s.slice: s for s in ([] if base is None else base.slices)}
    names = list(cur_slices) + [n for n in base_slices if n not in cur_slices]
    slices = [compare_slice(cur_slices.get(n), base_slices.get(n)) for n in names]
    mark_rises(slices, alpha)
    return {
        "arm": some.arm,
        "kind": some.kind,
        "spec_changed": None if cur is None or base is None else cur.spec != base.spec,
        "decision": None if cur is None else cur.decision,
        "baseline_decision": None if base is None else base.decision,
        "change": _change(None if cur is None else cur.decision, None if base is None else base.decision),
        "slices": slices,
    }


def compare_reports(current: Report, baseline: Report, allow_different: bool = False) -> Compare:
    """`current` against `baseline`: per arm (matched by name) and slice, deltas are current − baseline.
    BadInput when the runs differ in workload, model or engine and `allow_different` is False."""
    differs = [k for k in RUN_KEYS if getattr(current.run, k) != getattr(baseline.run, k)]
    incomparable = [k.replace("_sha256", "") for k in COMPARABLE if k in differs]
    if incomparable and not allow_different:
        raise BadInput(
            f"run {current.run.run_id} and baseline {baseline.run.run_id} differ in "
            f"{', '.join(incomparable)}: not comparable (pass --allow-different to compare anyway)"
        )
    alpha = 1.0 - float(current.policy.confidence)
    cur_arms = {a.arm: a for a in current.arms}
    base_arms = {a.arm: a for a in baseline.arms}
    names = list(cur_arms) + [n for n in base_arms if n not in cur_arms]
    arms = [compare_arm(cur_arms.get(n), base_arms.get(n), alpha) for n in names]
    regressions = [
        {
            "arm": a["arm"],
            "slice": s["slice"],
            "from": s["baseline_decision"],
            "to": s["decision"],
            "baseline_cfr": s["baseline_cfr"],
            "cfr": s["cfr"],
            "cfr_delta": s["cfr_delta"],
            "rise_p_holm": s["rise_p_holm"],
            "why": "decision worse"
            if _change(s["decision"], s["baseline_decision"]) == "regression"
            else "CFR rose significantly",
        }
        for a in arms
        for s in a["slices"]
        if s["change"] == "regression"
    ]
    return Compare.model_validate(
        {
            "current": _run(current),
            "baseline": _run(baseline),
            "differs": [k.replace("_sha256", "") for k in differs],
            "decision_change": _change(current.decision, baseline.decision),
            "regressions": regressions,
            "arms": arms,
        }
    )
