"""A sequential run's looks (gate.sequential), rebuilt from the manifest and replayed on the stored rows.

The order of the cases, the look points and each look's α are functions of the run's cases, its declared
policy and its run id alone, so `kvgate run` (deciding when to stop) and `kvgate report` (deciding what
was found) compute the same looks, and a resumed run replays them exactly. An arm's verdict is its
decision at the first look where it is final (PASS or FAIL), else at the last look.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from kvgate.gate.policy import Policy
from kvgate.gate.sequential import Look, looks, strata, stratified_order
from kvgate.report.analysis.arm import ReportContext, arm_report
from kvgate.report.analysis.slices import ALL, SliceGroup, is_gated
from kvgate.rundir.manifest import spec_hash_of_run_id


def order_seed(run_id: str) -> int:
    """The seed of a run's case order: the spec hash its run id ends with (a hash of everything the run
    is), so a resumed run, and any run of the same spec, replays the same order."""
    return int(spec_hash_of_run_id(run_id), 16)


def gated_strata(groups: list[SliceGroup], policy: Policy, n_cases: int) -> np.ndarray:
    """Per case, the strata of gate.sequential: which gated slices other than `all` hold it."""
    columns = [
        g.codes == i
        for g in groups
        for i, name in enumerate(g.names)
        if name != ALL and is_gated(name, policy)
    ]
    return strata(np.stack(columns, axis=1) if columns else np.zeros((n_cases, 0), dtype=bool))


def run_order(groups: list[SliceGroup], policy: Policy, n_cases: int, run_id: str) -> np.ndarray:
    """Case positions in the order a sequential run generates them."""
    return stratified_order(gated_strata(groups, policy, n_cases), order_seed(run_id))


def schedule(groups: list[SliceGroup], policy: Policy, n_cases: int, run_id: str) -> list[Look]:
    """The run's looks (gate.sequential.looks over its order)."""
    return looks(run_order(groups, policy, n_cases, run_id), policy)


def sequential_arm_report(name: str, ctx: ReportContext, looks: list[Look]) -> dict[str, Any]:
    """The arm's report at its stopping look, with a `sequential` block saying where and why it stopped."""
    arm: dict[str, Any] = {}
    for look in looks:
        at = replace(ctx, selected=look.selected, policy=look.policy, aa=np.where(look.selected, ctx.aa, -1))
        arm = arm_report(name, at)
        last = look.index == look.looks
        if arm["decision"] in ("pass", "fail", "error") or last:
            if arm["decision"] in ("pass", "fail"):
                why = f"{arm['decision'].upper()} is final at this look (α spent here {look.alpha:.3g})"
            elif arm["decision"] == "error":
                why = "stopped on an error"
            else:
                why = "no verdict before the last look"
            arm["sequential"] = {
                "look": look.index,
                "looks": look.looks,
                "cases": look.count,
                "of_cases": look.of_cases,
                "alpha": look.alpha,
                "why": why,
            }
            return arm
    return arm
