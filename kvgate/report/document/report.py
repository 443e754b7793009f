"""The whole report: the run's provenance, the policy it was gated on, the control, the A/A noise floor,
the isolation checks, each candidate arm and the run's decision (analysis.build builds it)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, StrictBool

from kvgate.report.document.arm import Arm
from kvgate.report.document.base import (
    UNIQUE,
    Bounded,
    Confidence,
    Count,
    Decision,
    ExitCode,
    Hex64,
    Name,
    Object,
    Positive,
    Rate,
    RunId,
    Shape,
    SliceName,
    Str,
    Text,
    Verdict,
    absent,
    unique,
)
from kvgate.report.document.compare import Compare
from kvgate.report.document.stress import Stress

SCHEMA = 7
"""Version of the report JSON's shape (2: slice roles, adjusted p-values, clusters, attribution intervals;
3: each arm's certificate attribution; 4: its primary score the mean relative bound, the others under
`other_scores`, and `cap_share`; 5: each arm's proof of treatment, KV bytes counted by the engine;
6: the stress schedule each arm and the control ran under, with its counts, `stress`; 7: the serving
stack's version a server engine's run recorded, `run.stack_version`)."""


class OpenShape(Shape):
    """An object with fixed keys and any others its source adds."""

    model_config = ConfigDict(extra="allow")


class ResolvedModel(OpenShape):
    """The model as the run resolved it; keys besides name depend on where it came from."""

    name: Text


class EngineInfo(OpenShape):
    """The engine and what it reported of itself (version, dtype, device…); keys besides engine depend
    on the engine."""

    engine: Text


class StackVersion(Shape):
    """The version of the serving stack every server of the run named (rundir/stack_version.py)."""

    stack: Text
    version: Text | None
    """None: the servers named none where their stack names it."""
    source: Text
    """Where it was read: "GET /props build_info"."""


class Provenance(Shape):
    """The run's provenance, copied from its manifest."""

    run_id: RunId
    created_at: Str | None
    workload_sha256: Hex64
    tokenizer: Str | None
    model: ResolvedModel
    engine: EngineInfo
    engine_options: Object
    """The -E options, typed."""
    matrix_name: Str | None
    n_cases: Positive
    limit: Positive | None
    policy_sha256: Hex64
    git_commit: Str | None
    kvgate_version: Str | None
    stack_version: StackVersion | None = absent("Recorded by runs on a server engine only.")


class PolicyBlock(Shape):
    """The policy the gate ran on (the declared one unless changed_reason says why not)."""

    tau: Rate
    confidence: Confidence
    alpha: Annotated[float, Bounded(exclusive_minimum=0, maximum=0.5)]
    rule: Literal["upper_bound", "point"]
    min_control_passes: Positive
    critical: list[SliceName]
    slice_tau: dict[SliceName, Rate]
    signal_alpha: Annotated[float, Bounded(minimum=0, exclusive_maximum=1)]
    aa_margin: Annotated[float, Bounded(minimum=0, exclusive_maximum=1)]
    cluster: Annotated[str, Field(strict=True, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
    defects: Literal["estimate", "per_case", "per_cluster"]
    strata: list[Str]
    allow_unwinnable: StrictBool
    procedure: Text
    unsafe: list[Str]
    unsafe_reason: Str | None
    sha256: Hex64
    declared_sha256: Hex64
    changed_reason: Str | None


class Control(Shape):
    arm: Name
    n: Count
    passes: Count
    engine_errors: Count
    pass_rate: Rate | None
    stress: Stress | None


class NoiseFloor(Shape):
    """The control against its A/A replicate."""

    n_pairs: Count
    flips: Count
    flip_rate: Rate | None
    control_passes: Count
    replicate_failures: Count
    aa_cfr: Rate | None
    aa_cfr_upper: Rate | None
    token_divergences: Count


class IsolationCheck(Shape):
    arm: Name
    ok: StrictBool
    cache_hit_cases: Count
    detail: Str


class Report(Verdict):
    """What `kvgate report RUN --format json` and `kvgate run --json` print. docs/reference.md describes
    the fields."""

    schema_: Literal[7] = Field(alias="schema", description="Version of this shape (SCHEMA).")
    kvgate_version: Text
    run: Provenance
    policy: PolicyBlock
    slice_columns: Annotated[list[Name], AfterValidator(unique), Field(json_schema_extra=UNIQUE)]
    control: Control
    noise_floor: NoiseFloor | None = Field(
        description="The control against its A/A replicate; null without one."
    )
    isolation: list[IsolationCheck]
    notes: list[Str]
    arms: list[Arm]
    decision: Decision
    exit_code: ExitCode
    compare: Compare | None = absent()

    def arm_named(self, name: str) -> Arm | None:
        """The candidate arm called `name`, or None."""
        return next((a for a in self.arms if a.arm == name), None)

    def json_data(self) -> dict[str, Any]:
        """The report as the JSON it prints: every field it holds, none it left out."""
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return data


def as_report(report: Report | dict[str, Any]) -> Report:
    """`report`, or a report's parsed JSON read into its model (ValidationError when it does not fit)."""
    return report if isinstance(report, Report) else Report.model_validate(report)
