"""One candidate arm's report (analysis.arm): its decision, slices and what else the run shows of it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictBool

from kvgate.report.document.base import (
    Count,
    Decision,
    ExitCode,
    Kind,
    Name,
    Rate,
    Shape,
    Text,
    Verdict,
    absent,
)
from kvgate.report.document.findings import (
    Attribution,
    CertificateAttribution,
    ContextPoint,
    Divergence,
    Failure,
    Sequential,
)
from kvgate.report.document.gains import Gains
from kvgate.report.document.proof import Proof
from kvgate.report.document.slice import Slice
from kvgate.report.document.stress import Stress
from kvgate.report.document.treatment import Treatment


class ScoredCases(Shape):
    failures: Count
    passes: Count


class Arm(Verdict):
    """One candidate arm's report (analysis.arm)."""

    arm: Name
    kind: Kind
    spec: Treatment
    decision: Decision
    exit_code: ExitCode
    reason: Text
    n_cases: Count
    engine_errors: Count
    missing_pairs: Count
    lossless: StrictBool
    confirm_reruns: Annotated[int, Field(strict=True, ge=0, le=10)]
    reproducible_failures: Count | None
    flaky_failures: Count | None
    unconfirmed_failures: Count
    confidence_auc: Rate | None
    confidence_auc_n: ScoredCases
    certificate_attribution: CertificateAttribution | None
    divergence: Divergence
    by_context: list[ContextPoint]
    attribution: Attribution | None
    slices: Annotated[list[Slice], Field(min_length=1)]
    failures: list[Failure]
    gains: Gains | None
    sequential: Sequential | None = absent()
    proof: Proof | None
    stress: Stress | None

    def slice_named(self, name: str) -> Slice | None:
        """The slice called `name` (`all`, `critical`, `task=passkey`), or None."""
        return next((s for s in self.slices if s.slice == name), None)
