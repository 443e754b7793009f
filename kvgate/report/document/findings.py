"""What an arm's report shows beside its gate: where outputs diverge (analysis.divergence), CFR against
context length (analysis.context), a composite's attribution to its parts (analysis.attribution), the
certificate's attribution (analysis.certificate_attribution), failing examples and the sequential stop."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from kvgate.report.document.base import (
    Confidence,
    Count,
    Kind,
    Labels,
    Name,
    NonNegative,
    Positive,
    Rate,
    Shape,
    Str,
    Text,
)


class Divergence(Shape):
    """Where the candidate's output first leaves the control's (analysis.divergence)."""

    n_pairs: Count
    diverged: Count
    identical: Count
    diverged_and_failed: Count
    identical_and_failed: Count
    median: NonNegative | None
    bin_edges: Annotated[list[Count], Field(min_length=2)]
    failed: Annotated[list[Count], Field(min_length=1)]
    passed: Annotated[list[Count], Field(min_length=1)]


class ContextPoint(Shape):
    """One context bucket: its median prompt length and CFR with bounds (analysis.context)."""

    bucket: Str
    prompt_tokens: NonNegative | None
    n_pairs: Count
    control_passes: Count
    cache_induced_failures: Count
    cfr: Rate | None
    cfr_lower: Rate | None
    cfr_upper: Rate | None


AttributionClass = Literal[
    "eviction", "quantize", "offload", "reuse", "both", "several", "interaction", "unattributed"
]


class AttributionPart(Shape):
    arm: Name
    kind: Kind


class ClassInterval(Shape):
    rate: Rate | None
    lower: Rate | None
    upper: Rate | None


class Attribution(Shape):
    """A composite arm's cache-induced failures classed by which parts fail them alone
    (analysis.attribution)."""

    parts: list[AttributionPart]
    missing_parts: list[Str]
    failures: Count
    classes: dict[AttributionClass, Count] | None
    control_passes: Count
    confidence: Confidence
    intervals: dict[AttributionClass, ClassInterval] | None


class AucInterval(Shape):
    """An AUC with its DeLong standard error and two-sided normal interval clipped to [0, 1]."""

    auc: Rate
    se: NonNegative
    lower: Rate
    upper: Rate


class OtherScores(Shape):
    certificate_bound_max: AucInterval | None
    certificate_bound_mean: AucInterval | None
    certificate_relative_estimate_mean: AucInterval | None


class CertificateAttribution(Shape):
    """Among the arm's failures, how well its attention-error certificate tells cache-induced failures
    (the control passes) from the model's own (the control fails too), beside output confidence on the
    same cases (analysis.certificate_attribution). `certificate` is the AUC of the declared primary score
    `score` (the mean bound relative to the retained output's norm); `other_scores` those of the bound's
    max and mean and of the mean relative estimate; `cap_share` the mean share of cells whose bound is the
    deterministic cap, over the scored failures (null when none). Each AUC is the chance that a
    cache-induced failure scores above an own failure (ties ½), with DeLong's interval; all are null when
    either kind has fewer than min_per_kind failures."""

    score: Literal["certificate_relative_bound_mean"]
    confidence_score: Literal["-mean_logprob"]
    cache_induced: Count
    own: Count
    unscored: Count
    min_per_kind: Annotated[int, Field(strict=True, ge=2)]
    confidence: Confidence
    method: Literal["DeLong"]
    cap_share: Rate | None
    certificate: AucInterval | None
    other_scores: OtherScores
    output_confidence: AucInterval | None


class Failure(Shape):
    """One cache-induced failure: the control passed, the candidate failed."""

    case_id: Text
    source_id: Str | None = None
    """The record's own id in its trace or data set (the workload's source_id), where it has one."""
    prompt: Str | None = None
    """The start of the case's last user message, on one line (at most 80 characters)."""
    labels: Labels
    expected: Any
    """The workload's expected answer, decoded from its JSON (a string, or a list of strings, or what the
    validator takes)."""
    control_output: Str | None
    candidate_output: Str | None
    detail: Str | None
    fail_kind: Literal["mismatch", "invalid", "engine_error", "timeout"] | None
    first_divergence: Annotated[int, Field(strict=True, ge=0)] | None


class Sequential(Shape):
    """Where a sequential gate stopped the arm (analysis.sequential)."""

    look: Positive
    looks: Positive
    cases: Count
    of_cases: Positive
    alpha: Rate
    why: Text
