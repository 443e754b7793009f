"""Run a matrix: open (or continue) the run directory, then generate every row it is missing.

The manifest is written before the first generation, so the policy and τ are on disk before any
result exists. Passes (see `passes.py`) run in order, each in a fresh engine session with a namespace of
its own; rows are validated as they come and stored in atomic parts of whole batches, a part every
PART_SECONDS of generation. When a pass ends, its arm's parts are merged into one (`store.compact`), so
a long run leaves a part per pass, not per flush. A resumed run skips exactly the rows already stored.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvgate.engines.base import ArmSession, ArmSetup, Engine, NamesItsStack
from kvgate.errors import BadInput, EngineFailure, KvgateError, TreatmentRefused
from kvgate.rundir.manifest import MANIFEST, changed_identity, read_manifest, write_manifest
from kvgate.rundir.stack_version import record_stack_version
from kvgate.rundir.store import RowKey, compact, read_results, stored_keys, write_part
from kvgate.runner.context import RunContext
from kvgate.runner.control_check import refuse_unwinnable_on_control
from kvgate.runner.passes import (
    ArmRun,
    candidate_only_failures,
    first_passes,
    namespace,
    rerun_pass,
    reuses,
)
from kvgate.runner.rows import result_row
from kvgate.treatments.matrix import Matrix
from kvgate.treatments.spec import Treatment
from kvgate.workload.case import Case

PART_SECONDS = 0.25
"""A part is stored once this much generation time has gathered (whole batches): a crash loses at most
this, or the batch in flight."""
MAX_PART_ROWS = 1024


def check_applicable(engine: Engine, matrix: Matrix) -> None:
    """Every arm is one the engine can apply, before anything is written or generated."""
    for treatment in matrix.arms():
        reason = engine.refusal(treatment)
        if reason:
            raise TreatmentRefused(f"engine {engine.name!r} refuses arm {treatment.name!r}: {reason}")


def refuse_if_changed(run_dir: Path, stored: dict[str, Any], current: dict[str, Any]) -> None:
    changed = changed_identity(stored, current)
    if changed:
        raise BadInput(f"cannot resume {run_dir}: changed since it started: {'; '.join(changed)}")


def open_run(run_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Write `manifest` for a new run, or return the stored one when it has the same identity."""
    if (run_dir / MANIFEST).exists():
        stored = read_manifest(run_dir)
        refuse_if_changed(run_dir, stored, manifest)
        return stored
    write_manifest(run_dir, manifest)
    return manifest


def execute(ctx: RunContext) -> None:
    """Generate every missing row of the run: first passes, then confirm-reruns. After the control's
    pass, a critical slice its passes cannot carry is refused before anything else generates."""
    ctx.done = stored_keys(ctx.run_dir)
    control, *others = first_passes(ctx.matrix, ctx.cases)
    run_pass(ctx, control)
    refuse_unwinnable_on_control(ctx.run_dir, ctx.matrix, ctx.cases, ctx.policy)
    for arm_run in others:
        run_pass(ctx, arm_run)
    run_reruns(ctx, ctx.matrix.candidates)


def run_reruns(ctx: RunContext, candidates: Sequence[Treatment]) -> None:
    """The confirm-reruns of each candidate's candidate-only failures among the rows stored."""
    control = ctx.matrix.control.name
    for attempt in range(1, ctx.matrix.confirm_reruns + 1):
        for candidate in candidates:
            failures = candidate_only_failures(ctx.run_dir, control, candidate.name)
            rerun = rerun_pass(candidate, attempt, ctx.cases, failures)
            if rerun is not None:
                run_pass(ctx, rerun)


def run_pass(ctx: RunContext, arm_run: ArmRun) -> None:
    """Generate the rows of one pass that are not stored yet, then merge the arm's parts."""

    def key(case: Case) -> RowKey:
        return (arm_run.arm, arm_run.replicate, case.case_id, arm_run.attempt)

    kept = arm_run.kept()
    missing = {c.case_id for c in kept if key(c) not in ctx.done}
    ctx.progress.start(arm_run.label, len(kept), len(kept) - len(missing))
    try:
        if missing:
            batches = plan_batches(arm_run, missing, ctx.matrix.submit_size_for(arm_run.arm))
            _generate(ctx, arm_run, batches, missing)
        compact(ctx.run_dir, arm_run.arm)  # also merges parts an interrupted earlier session left
    finally:
        ctx.progress.finish()


def plan_batches(arm_run: ArmRun, missing: set[str], size: int) -> list[Sequence[Case]]:
    """Batches to generate: for a reuse arm every batch up to the last one missing a row (history
    replayed, in the workload's order), for any other arm only the missing cases, ordered by prompt
    length (stable) when batches hold more than one, so that cases of one length share a batch and
    the hf engine, which batches only equal lengths, can run them together on a mixed suite."""
    if reuses(arm_run.treatment):
        batches: list[Sequence[Case]] = [
            arm_run.cases[i : i + size] for i in range(0, len(arm_run.cases), size)
        ]
        last = max(i for i, b in enumerate(batches) if any(c.case_id in missing for c in b))
        return batches[: last + 1]
    todo = [c for c in arm_run.cases if c.case_id in missing]
    if size > 1:
        todo.sort(key=_batch_shape)
    return [todo[i : i + size] for i in range(0, len(todo), max(1, size))]


def _batch_shape(case: Case) -> tuple[int, int, int]:
    """What the hf engine batches by: prompt length, then the question's start and max_new_tokens."""
    return (len(case.prompt_token_ids or ()), case.question_start or 0, case.max_new_tokens)


def _generate(ctx: RunContext, arm_run: ArmRun, batches: list[Sequence[Case]], missing: set[str]) -> None:
    reference = arm_run.arm == ctx.matrix.control.name and arm_run.replicate == 0 and arm_run.attempt == 0
    control = {} if reference else control_tokens(ctx)
    session = _open_session(ctx, arm_run)
    pending: list[dict[str, Any]] = []
    stored_at = time.monotonic()
    try:
        for batch in batches:
            try:
                generations = session.generate(batch)
            except KvgateError:
                raise
            except Exception as exc:
                raise EngineFailure(
                    f"engine {ctx.engine.name!r} failed in arm {arm_run.label!r} on case {batch[0].case_id}: "
                    f"{type(exc).__name__}: {exc}; resume with `kvgate run --resume {ctx.run_dir}`"
                ) from exc
            if len(generations) != len(batch):
                raise EngineFailure(
                    f"engine {ctx.engine.name!r} returned {len(generations)} outputs for {len(batch)} cases"
                )
            rows = [
                result_row(case, gen, arm_run, control.get(case.case_id))
                for case, gen in zip(batch, generations, strict=True)
                if case.case_id in missing
            ]
            pending += rows
            ctx.progress.advance(len(rows))
            if pending and (time.monotonic() - stored_at >= PART_SECONDS or len(pending) >= MAX_PART_ROWS):
                full, pending = pending, []
                store_rows(ctx, arm_run.arm, full)
                stored_at = time.monotonic()
    finally:
        try:
            if pending:  # complete batches stay stored even when the engine failed or the user interrupted
                store_rows(ctx, arm_run.arm, pending)
        finally:
            session.close()


def arm_setup(ctx: RunContext, arm_run: ArmRun) -> ArmSetup:
    """The session set-up of a pass: its namespace, planted faults, batch size and the run's seed."""
    return ArmSetup(
        arm=arm_run.arm,
        replicate=arm_run.replicate,
        treatment=arm_run.treatment,
        namespace=namespace(ctx.manifest["run_id"], arm_run.arm, arm_run.replicate, arm_run.attempt),
        faults=ctx.matrix.faults_for(arm_run.arm),
        batch_size=ctx.matrix.submit_size_for(arm_run.arm),
        seed=ctx.matrix.seed,
        concurrency=ctx.matrix.concurrency_for(arm_run.arm),
        kv_blocks=ctx.matrix.kv_blocks_for(arm_run.arm),
        abort_percent=ctx.matrix.abort_percent_for(arm_run.arm),
        run_dir=ctx.run_dir,
        interleave=bool(ctx.matrix.load_value(arm_run.arm, "interleave")),
        resend_percent=int(ctx.matrix.load_value(arm_run.arm, "resend_percent")),
        repeat=int(ctx.matrix.load_value(arm_run.arm, "repeat")),
    )


def _open_session(ctx: RunContext, arm_run: ArmRun) -> ArmSession:
    try:
        session = ctx.engine.open(arm_setup(ctx, arm_run))
    except KvgateError:
        raise
    except Exception as exc:
        raise EngineFailure(
            f"engine {ctx.engine.name!r} failed to start arm {arm_run.label!r}: {exc}"
        ) from exc
    try:
        if isinstance(session, NamesItsStack):
            check_stack_version(ctx, arm_run.arm, session.stack_version)
    except BaseException:
        session.close()
        raise
    return session


def check_stack_version(ctx: RunContext, arm: str, answered: dict[str, Any] | None) -> None:
    """The version arm `arm`'s server named must be the run's (`rundir/stack_version.py`); the first one
    is written to the manifest before any of its rows."""
    if answered is not None and record_stack_version(ctx.manifest, arm, answered, ctx.run_dir):
        write_manifest(ctx.run_dir, ctx.manifest)


def store_rows(ctx: RunContext, arm: str, rows: list[dict[str, Any]]) -> None:
    write_part(ctx.run_dir, arm, rows)
    ctx.done.update((r["arm"], r["replicate"], r["case_id"], r["attempt"]) for r in rows)


def control_tokens(ctx: RunContext) -> dict[str, list[int]]:
    """The control's output tokens per case (replicate 0, first attempt), engine errors left out."""
    if ctx.control_tokens is None:
        ctx.control_tokens = _read_control_tokens(ctx)
    return ctx.control_tokens


def _read_control_tokens(ctx: RunContext) -> dict[str, list[int]]:
    columns = ["case_id", "arm", "replicate", "attempt", "fail_kind", "output_token_ids"]
    return {
        r["case_id"]: r["output_token_ids"]
        for r in read_results(ctx.run_dir, columns).to_pylist()
        if r["arm"] == ctx.matrix.control.name
        and r["replicate"] == 0
        and r["attempt"] == 0
        and r["fail_kind"] not in ("engine_error", "timeout")
    }
