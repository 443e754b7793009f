"""One slice of one candidate arm (analysis.slice_stats); docs/gate.md has what each figure means."""

from __future__ import annotations

import math
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


def needed_clusters(
    passes_needed: int | None,
    design_effect: float,
    icc_upper: float | None,
    control_passes: int,
    clusters: int,
) -> int | None:
    """Distinct clusters a PASS would need at the slice's CFR when its clusters bind (design effect above
    1.5 at the ICC it was tested at: more cases of the same clusters add little); None otherwise."""
    if not passes_needed or passes_needed <= 0 or icc_upper is None or design_effect <= 1.5:
        return None
    per_cluster = control_passes / max(clusters, 1)
    return math.ceil(passes_needed / max(per_cluster, 1.0))


class AATable(Shape):
    """The paired A/A test's 2×2 table on the slice's control passes; aa_pairs is its total."""

    both_pass: Count
    candidate_only_fails: Count
    replicate_only_fails: Count
    both_fail: Count


class Slice(Shape):
    """One slice of one candidate arm (analysis.slice_stats); docs/gate.md has what each figure means."""

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

    def clusters_needed(self) -> int | None:
        """Distinct clusters a PASS would need at this CFR when its clusters bind (`needed_clusters`)."""
        return needed_clusters(
            self.passes_needed, self.design_effect, self.icc_upper, self.control_passes, self.clusters
        )
