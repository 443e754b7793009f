"""The passes of a run: which (arm, replicate, attempt) generates which cases, in which order.

Order: the control (replicate 0) first, since every other pass is compared with its tokens; then the
A/A replicate of the control; then each candidate; then `confirm_reruns` re-runs of each candidate's
candidate-only failures. Each pass gets a fresh session in a namespace of its own.

A reuse arm's outputs depend on what its cache holds, so its passes replay history: a re-run generates
the whole pass again in a fresh namespace and stores only the rows being confirmed, and a resumed pass
first regenerates (and discards) the cases it had already stored, so the remaining cases meet the cache
they would have met without the crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvgate.rundir.store import read_results
from kvgate.treatments.matrix import Matrix
from kvgate.treatments.spec import Treatment
from kvgate.workload.case import Case


@dataclass(frozen=True)
class ArmRun:
    """One pass: `cases` generated in order under (treatment, replicate, attempt).

    `keep`: the case ids whose rows are stored (None: all); the others only warm the cache.
    """

    treatment: Treatment
    replicate: int
    attempt: int
    cases: tuple[Case, ...]
    keep: frozenset[str] | None = None

    @property
    def arm(self) -> str:
        return self.treatment.name

    @property
    def label(self) -> str:
        suffix = f" (A/A replicate {self.replicate})" if self.replicate else ""
        return f"{self.arm}{suffix}" + (f" rerun {self.attempt}" if self.attempt else "")

    def kept(self) -> list[Case]:
        return [c for c in self.cases if self.keep is None or c.case_id in self.keep]


def reuses(treatment: Treatment) -> bool:
    """Whether the arm may serve a request from KV computed for an earlier one (its outputs have history)."""
    return any(part.kind == "reuse" for part in treatment.parts())


def namespace(run_id: str, arm: str, replicate: int, attempt: int) -> str:
    """A cache namespace unique to run, arm, replicate and attempt (prefixed: never a LoRA name)."""
    return f"kvgate-ns:{run_id}:{arm}:r{replicate}:a{attempt}"


def first_passes(matrix: Matrix, cases: tuple[Case, ...]) -> list[ArmRun]:
    passes = [ArmRun(matrix.control, 0, 0, cases)]
    if matrix.aa_replicate:
        passes.append(ArmRun(matrix.control, 1, 0, cases))
    return passes + [ArmRun(c, 0, 0, cases) for c in matrix.candidates]


def rerun_pass(
    candidate: Treatment, attempt: int, cases: tuple[Case, ...], failures: set[str]
) -> ArmRun | None:
    """Re-run attempt `attempt` of `candidate` on its candidate-only `failures` (None when there are none)."""
    if not failures:
        return None
    if reuses(candidate):
        return ArmRun(candidate, 0, attempt, cases, frozenset(failures))
    return ArmRun(candidate, 0, attempt, tuple(c for c in cases if c.case_id in failures))


def candidate_only_failures(run_dir: Path, control: str, candidate: str) -> set[str]:
    """Case ids the control (replicate 0) passes and the candidate's first attempt fails.

    Engine errors are no verdict on the cache: they are never re-run as candidate-only failures.
    """
    columns = ["case_id", "arm", "replicate", "attempt", "passed", "fail_kind"]
    data = read_results(run_dir, columns).to_pylist()
    first = [r for r in data if r["replicate"] == 0 and r["attempt"] == 0]
    control_passes = {r["case_id"] for r in first if r["arm"] == control and r["passed"]}
    return {
        r["case_id"]
        for r in first
        if r["arm"] == candidate
        and not r["passed"]
        and r["fail_kind"] != "engine_error"
        and r["case_id"] in control_passes
    }
