"""Run a matrix: every case under the control, its A/A replicate and each candidate, then confirm-reruns.

Order: control (replicate 0) first, since candidates are compared with its tokens; then the A/A replicate;
then each candidate; then re-runs of candidate-only failures. Each (arm, replicate, attempt) gets a fresh
session with its own namespace. Rows are validated as they come and stored in atomic parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kvgate.engines.base import ArmSetup, Engine, Generation
from kvgate.errors import EngineFailure, TreatmentRefused
from kvgate.gate.policy import Policy
from kvgate.runner.manifest import build_manifest, changed_identity, read_manifest, write_manifest
from kvgate.runner.store import read_results, stored_keys, write_part
from kvgate.treatments.matrix import Matrix
from kvgate.treatments.spec import Treatment
from kvgate.validators.registry import get_validator
from kvgate.workload.case import Case
from kvgate.workload.schema import Workload

PART_ROWS = 8
"""Rows per stored part: a crash loses at most this many generations."""


class Progress(Protocol):
    def start(self, label: str, total: int) -> None: ...

    def advance(self, n: int) -> None: ...

    def finish(self) -> None: ...


class NoProgress:
    def start(self, label: str, total: int) -> None:
        return None

    def advance(self, n: int) -> None:
        return None

    def finish(self) -> None:
        return None


@dataclass(frozen=True)
class ArmRun:
    """One pass of one arm: (treatment, replicate, attempt) over some cases."""

    treatment: Treatment
    replicate: int
    attempt: int
    cases: tuple[Case, ...]

    @property
    def label(self) -> str:
        suffix = f" (A/A replicate {self.replicate})" if self.replicate else ""
        return f"{self.treatment.name}{suffix}" + (f" rerun {self.attempt}" if self.attempt else "")


@dataclass
class RunContext:
    run_dir: Path
    manifest: dict[str, Any]
    workload: Workload
    cases: tuple[Case, ...]
    matrix: Matrix
    policy: Policy
    engine: Engine
    progress: Progress = field(default_factory=NoProgress)


def select_cases(workload: Workload, limit: int | None) -> tuple[Case, ...]:
    """The first `limit` cases spread evenly over the workload (all when None)."""
    cases = workload.cases
    if limit is None or limit >= len(cases):
        return cases
    step = len(cases) / limit
    return tuple(cases[int(i * step)] for i in range(limit))


def prepare_run(
    runs_dir: Path,
    workload: Workload,
    cases: tuple[Case, ...],
    model: dict[str, Any],
    engine: Engine,
    matrix: Matrix,
    policy: Policy,
    resume: Path | None = None,
    limit: int | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Check every arm is applicable, then create (or verify, when resuming) the run directory."""
    for treatment in matrix.arms():
        reason = engine.refusal(treatment)
        if reason:
            raise TreatmentRefused(f"engine {engine.name!r} refuses arm {treatment.name!r}: {reason}")
    manifest = build_manifest(
        workload, [c.case_id for c in cases], model, engine.fingerprint(), matrix, policy, limit
    )
    run_dir = resume if resume is not None else runs_dir / manifest["run_id"]
    if (run_dir / "manifest.json").exists():
        stored = read_manifest(run_dir)
        changed = changed_identity(stored, manifest)
        if changed:
            raise TreatmentRefused(f"cannot resume {run_dir}: changed since it started: {', '.join(changed)}")
        return run_dir, stored
    run_dir.mkdir(parents=True, exist_ok=True)
    write_manifest(run_dir, manifest)
    return run_dir, manifest


def namespace(run_id: str, arm: str, replicate: int, attempt: int) -> str:
    """A cache namespace unique to run, arm, replicate and attempt (prefixed: never a LoRA name)."""
    return f"kvgate-ns:{run_id}:{arm}:r{replicate}:a{attempt}"


def execute(ctx: RunContext) -> None:
    """Generate every missing row of the run."""
    matrix, cases = ctx.matrix, ctx.cases
    passes = [ArmRun(matrix.control, 0, 0, cases)]
    if matrix.aa_replicate:
        passes.append(ArmRun(matrix.control, 1, 0, cases))
    passes += [ArmRun(c, 0, 0, cases) for c in matrix.candidates]
    for arm_run in passes:
        _run_pass(ctx, arm_run)
    for attempt in range(1, matrix.confirm_reruns + 1):
        for candidate in matrix.candidates:
            failures = candidate_only_failures(ctx.run_dir, matrix.control.name, candidate.name)
            rerun = tuple(c for c in cases if c.case_id in failures)
            if rerun:
                _run_pass(ctx, ArmRun(candidate, 0, attempt, rerun))


def candidate_only_failures(run_dir: Path, control: str, candidate: str) -> set[str]:
    """Case ids that the control (replicate 0) passes and the candidate's first attempt fails (not errors)."""
    data = read_results(run_dir, ["case_id", "arm", "replicate", "attempt", "passed", "fail_kind"]).to_pylist()
    control_pass = {r["case_id"] for r in data if r["arm"] == control and r["replicate"] == 0 and r["passed"]}
    return {
        r["case_id"]
        for r in data
        if r["arm"] == candidate
        and r["replicate"] == 0
        and r["attempt"] == 0
        and not r["passed"]
        and r["fail_kind"] != "engine_error"
        and r["case_id"] in control_pass
    }


def _run_pass(ctx: RunContext, arm_run: ArmRun) -> None:
    name = arm_run.treatment.name
    done = stored_keys(ctx.run_dir)
    todo = [c for c in arm_run.cases if (name, arm_run.replicate, c.case_id, arm_run.attempt) not in done]
    if not todo:
        return
    is_reference = name == ctx.matrix.control.name and arm_run.replicate == 0 and arm_run.attempt == 0
    control_tokens = {} if is_reference else _control_tokens(ctx)
    setup = ArmSetup(
        arm=name,
        replicate=arm_run.replicate,
        treatment=arm_run.treatment,
        namespace=namespace(ctx.manifest["run_id"], name, arm_run.replicate, arm_run.attempt),
        faults=ctx.matrix.faults_for(name),
        batch_size=ctx.matrix.batch_size,
    )
    ctx.progress.start(arm_run.label, len(todo))
    try:
        session = ctx.engine.open(setup)
    except Exception as exc:  # noqa: BLE001 - any engine start failure is an infrastructure error
        raise EngineFailure(f"engine {ctx.engine.name!r} failed to start arm {name!r}: {exc}") from exc
    try:
        pending: list[dict[str, Any]] = []
        for batch in _batches(todo, ctx.matrix.batch_size):
            generations = session.generate(batch)
            for case, gen in zip(batch, generations, strict=True):
                pending.append(result_row(case, gen, arm_run, control_tokens.get(case.case_id)))
            ctx.progress.advance(len(batch))
            if len(pending) >= PART_ROWS:
                write_part(ctx.run_dir, name, pending)
                pending = []
        if pending:
            write_part(ctx.run_dir, name, pending)
    finally:
        session.close()
        ctx.progress.finish()


def _batches(cases: Sequence[Case], size: int) -> list[Sequence[Case]]:
    return [cases[i : i + size] for i in range(0, len(cases), size)]


def _control_tokens(ctx: RunContext) -> dict[str, list[int]]:
    data = read_results(ctx.run_dir, ["case_id", "arm", "replicate", "attempt", "output_token_ids"]).to_pylist()
    control = ctx.matrix.control.name
    return {
        r["case_id"]: r["output_token_ids"]
        for r in data
        if r["arm"] == control and r["replicate"] == 0 and r["attempt"] == 0
    }


def first_divergence(control: Sequence[int] | None, candidate: Sequence[int]) -> int | None:
    """Index of the first output token where the candidate leaves the control's, or None if identical."""
    if control is None:
        return None
    for index, (a, b) in enumerate(zip(control, candidate, strict=False)):
        if a != b:
            return index
    return None if len(control) == len(candidate) else min(len(control), len(candidate))


def result_row(case: Case, gen: Generation, arm_run: ArmRun, control: Sequence[int] | None) -> dict[str, Any]:
    """Validate `gen` for `case` and build its result row (DESIGN.md, "Result row")."""
    if gen.error is not None:
        passed, fail_kind, detail = False, "engine_error", gen.error
    else:
        verdict = get_validator(case.validator)(gen.output_text, case.expected, case.validator_args)
        passed, fail_kind, detail = verdict.passed, verdict.fail_kind, verdict.detail
    return {
        "case_id": case.case_id,
        "arm": arm_run.treatment.name,
        "replicate": arm_run.replicate,
        "attempt": arm_run.attempt,
        "output_text": gen.output_text,
        "output_token_ids": list(gen.output_token_ids),
        "passed": passed,
        "fail_kind": fail_kind,
        "detail": detail,
        "n_prompt_tokens": gen.n_prompt_tokens,
        "n_cached_tokens": gen.n_cached_tokens,
        "n_kv_entries_kept": gen.n_kv_entries_kept,
        "ttft_s": gen.ttft_s,
        "latency_s": gen.latency_s,
        "mean_logprob": gen.mean_logprob,
        "min_logprob": gen.min_logprob,
        "first_divergence": None if gen.error else first_divergence(control, gen.output_token_ids),
    }


