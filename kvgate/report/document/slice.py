"""One slice of one candidate arm (report.slice_stats); docs/gate.md has what each figure means."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import StrictBool

from kvgate.report.document.base import (
    Bounded,
    Count,
    Labels,
    Name,
    Rate,
    Shape,
    SliceDecision,
    SliceName,
    Text,
)


class AATable(Shape):
    """The paired A/A test's 2×2 table on the slice's control passes; aa_pairs is its total."""

    both_pass: Count
    candidate_only_fails: Count
    replicate_only_fails: Count
    both_fail: Count


class Slice(Shape):
    """One slice of one candidate arm (report.slice_stats); docs/gate.md has what each figure means."""

    arm: Name
    slice: SliceName
    labels: Labels
    role: Literal["gate", "signal"]
    n_pairs: Count
    control_passes: Count
    cache_induced_failures: Count
    candidate_only_passes: Count
    both_fail: Count
    candidate_failures: Count
    cfr: Rate | None
    cfr_lower: Rate | None
    cfr_upper: Rate | None
    tau: Rate
    decision: SliceDecision
    reason: Text
    critical: StrictBool
    gated: StrictBool
    clusters: Count
    design_effect: Annotated[float, Bounded(minimum=1)]
    icc_upper: Rate | None
    """upper confidence bound of the intra-cluster correlation the clustered slice was tested at (null:
    no multi-case cluster)"""
    n_eff: Annotated[float, Bounded(minimum=0)]
    """control passes / design effect (Kish's effective n at the ICC tested)"""
    aa_table: AATable | None
    exceed_p: Rate | None
    adjusted_p: Rate | None
    alpha_share: Rate
    q_value: Rate | None
    flagged: StrictBool
    aa_p: Rate | None
    mcnemar_p: Rate | None
    min_detectable_cfr: Rate | None
    passes_needed: Count | None
    total_failure_rate: Rate | None
    aa_pairs: Count
    aa_flips: Count
    aa_flip_rate: Rate | None
    aa_cfr: Rate | None
    reproducible_failures: Count | None
    flaky_failures: Count | None
