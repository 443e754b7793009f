"""`--compare BASELINE`: this run against the baseline (analysis.compare); deltas are current − baseline."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictBool

from kvgate.report.document.base import (
    UNIQUE,
    Change,
    Count,
    Decision,
    Delta,
    ExitCode,
    Kind,
    Name,
    Rate,
    RunId,
    Shape,
    SliceDecision,
    SliceName,
    Str,
    Verdict,
    unique,
)


class CompareRun(Verdict):
    run_id: RunId
    git_commit: Str | None
    decision: Decision
    exit_code: ExitCode


class CompareSlice(Shape):
    slice: SliceName
    cache_induced_failures: Count | None
    control_passes: Count | None
    baseline_cache_induced_failures: Count | None
    baseline_control_passes: Count | None
    cfr: Rate | None
    baseline_cfr: Rate | None
    cfr_delta: Delta | None
    cfr_upper: Rate | None
    baseline_cfr_upper: Rate | None
    cfr_upper_delta: Delta | None
    decision: SliceDecision | None
    baseline_decision: SliceDecision | None
    change: Change
    gated: StrictBool
    rise_p: Rate | None
    rise_p_holm: Rate | None


class CompareArm(Shape):
    arm: Name
    kind: Kind
    spec_changed: StrictBool | None
    decision: Decision | None
    baseline_decision: Decision | None
    change: Change
    slices: list[CompareSlice]


class Regression(Shape):
    arm: Name
    slice: SliceName
    from_: SliceDecision = Field(alias="from")
    to: SliceDecision
    baseline_cfr: Rate | None
    cfr: Rate | None
    cfr_delta: Delta | None
    rise_p_holm: Rate | None
    why: Literal["decision worse", "CFR rose significantly"]


Differs = Literal["workload", "model", "engine", "policy", "n_cases"]


class Compare(Shape):
    """`--compare BASELINE`: this run against the baseline (analysis.compare); deltas are current −
    baseline."""

    current: CompareRun
    baseline: CompareRun
    differs: Annotated[list[Differs], AfterValidator(unique), Field(json_schema_extra=UNIQUE)]
    decision_change: Literal["same", "regression", "improvement"]
    regressions: list[Regression]
    arms: list[CompareArm]
