"""A sequential run's looks (gate.sequential), rebuilt from the manifest and replayed on the stored rows.

The order of the cases, the look points and each look's α are functions of the run's cases, its declared
policy and its run id alone, so `kvgate run` (deciding when to stop) and `kvgate report` (deciding what
was found) compute the same looks, and a resumed run replays them exactly. An arm's verdict is its
decision at the first look where it is final (PASS or FAIL), else at the last look.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kvgate.gate.policy import Policy
from kvgate.gate.sequential import look_ends, spent_alpha, stratified_order
from kvgate.report.arm import RunContext, arm_report
from kvgate.report.slices import ALL, SliceGroup, is_gated


@dataclass(frozen=True)
class Look:
    index: int
    """1-based."""
    count: int
    of_cases: int
    looks: int
    alpha: float
    selected: np.ndarray
    """Per case (run order): seen by this look."""
    policy: Policy
    """The declared policy at this look's level (confidence 1 − α_j)."""


def order_seed(run_id: str) -> int:
    """The seed of a run's case order: its run id, a hash of everything the run is."""
    return int(run_id[:12], 16)


def gated_strata(groups: list[SliceGroup], policy: Policy, n_cases: int) -> np.ndarray:
    """Per case, a code for which gated slices other than `all` hold it."""
    columns = [
        g.codes == i
        for g in groups
        for i, name in enumerate(g.names)
        if name != ALL and is_gated(name, policy)
    ]
    if not columns:
        return np.zeros(n_cases, dtype=np.int64)
    _, codes = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
    return np.asarray(codes, dtype=np.int64).ravel()


def run_order(groups: list[SliceGroup], policy: Policy, n_cases: int, run_id: str) -> np.ndarray:
    """Case positions in the order a sequential run generates them."""
    return stratified_order(gated_strata(groups, policy, n_cases), order_seed(run_id))


def schedule(groups: list[SliceGroup], policy: Policy, n_cases: int, run_id: str) -> list[Look]:
    order = run_order(groups, policy, n_cases, run_id)
    ends = look_ends(n_cases, policy.look_every)
    alphas = spent_alpha(policy.alpha, ends, policy.spending_power)
    looks = []
    for j, (end, a) in enumerate(zip(ends, alphas, strict=True)):
        seen = np.zeros(n_cases, dtype=bool)
        seen[order[:end]] = True
        level = replace(policy, confidence=1.0 - float(a))
        looks.append(Look(j + 1, int(end), n_cases, len(ends), float(a), seen, level))
    return looks


def sequential_arm_report(name: str, ctx: RunContext, looks: list[Look]) -> dict[str, Any]:
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
