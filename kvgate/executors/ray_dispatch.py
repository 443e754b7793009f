"""Handing work units to Ray workers and taking their rows back, batch by batch.

Every usable worker runs one unit at a time: the unit's session is opened and all its batches are sent
at once (an actor answers them in order, so the next batch is waiting when one ends); each answer is
validated into rows on the driver and handed to the row sink, its only writer. A worker lost mid-unit
(its process or node gone) gives its unit back: the unit is planned again from the rows had by then and
queued first, at most MAX_TRIES times. An engine that raises ends the run as locally (exit 4, or the
KvgateError it raised), with the rows received before stored.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from kvgate.engines.base import Generation
from kvgate.errors import EngineFailure, KvgateError
from kvgate.executors.ray_pool import Worker, WorkerPool
from kvgate.executors.row_sink import RowSink
from kvgate.executors.units import WorkUnit
from kvgate.rundir.hardware import record_unit
from kvgate.rundir.manifest import write_manifest
from kvgate.runner.context import RunContext
from kvgate.runner.rows import result_row
from kvgate.runner.run import PART_SECONDS, arm_setup, check_stack_version, control_tokens

MAX_TRIES = 3
"""How often a unit may lose its worker before the run gives up (exit 4, resumable)."""


class Dispatcher:
    """Runs lists of units on the pool's workers, their rows into the sink."""

    def __init__(self, ctx: RunContext, pool: WorkerPool, sink: RowSink, max_tries: int = MAX_TRIES):
        self.ctx, self.pool, self.sink, self.max_tries = ctx, pool, sink, max_tries

    def run(self, units: Sequence[WorkUnit], label: str) -> None:
        """Generate every unit's missing rows; returns once all are stored or waiting in the sink."""
        if not units:
            return
        queue = deque(units)
        self.ctx.progress.start(label, sum(len(u.missing) for u in units), 0)
        try:
            while queue or any(w.unit is not None for w in self.pool.workers):
                for worker in [w for w in self.pool.workers if w.idle]:
                    if not queue:
                        break
                    self._assign(worker, queue.popleft())
                self.pool.check_alive()
                self._wait(queue)
                self.sink.flush_due()
        finally:
            self.ctx.progress.finish()

    def _assign(self, worker: Worker, unit: WorkUnit) -> None:
        assert worker.machine is not None
        if record_unit(self.ctx.manifest, unit.arm_run.arm, worker.machine):
            write_manifest(self.ctx.run_dir, self.ctx.manifest)  # the kind is on disk before its rows
        worker.unit, worker.received = unit, 0
        worker.refs = {worker.actor.begin.remote(arm_setup(self.ctx, unit.arm_run)): -1}
        for index, batch in enumerate(unit.batches):
            worker.refs[worker.actor.generate.remote(batch)] = index
        worker.actor.end.remote()

    def _wait(self, queue: deque[WorkUnit]) -> None:
        calls = {ref: w for w in self.pool.workers for ref in w.refs}
        starts = self.pool.starting()
        if not calls and not starts:  # nothing to wait for: check_alive decides on the next round
            time.sleep(PART_SECONDS)
            return
        ready, _ = self.pool.ray.wait([*calls, *starts], num_returns=1, timeout=PART_SECONDS)
        for ref in ready:
            if ref in starts:
                self.pool.started(starts[ref])
            elif ref in calls and ref in calls[ref].refs:
                self._answer(calls[ref], ref, queue)

    def _answer(self, worker: Worker, ref: Any, queue: deque[WorkUnit]) -> None:
        unit = worker.unit
        assert unit is not None
        index = worker.refs.pop(ref)
        ray = self.pool.ray
        try:
            answer = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            self._engine_failed(worker, unit, index, exc)
        except ray.exceptions.RayError as exc:
            self._lost(worker, unit, queue, type(exc).__name__)
            return
        if index < 0:  # the session opened: its server's stack version must be the run's
            try:
                check_stack_version(self.ctx, unit.arm_run.arm, answer)
            except KvgateError:
                self.sink.flush_all()
                raise
            return
        self._take(unit, unit.batches[index], answer)
        worker.received += 1
        if worker.received == len(unit.batches):
            worker.unit, worker.refs = None, {}

    def _take(self, unit: WorkUnit, batch: Sequence[Any], generations: list[Generation]) -> None:
        if len(generations) != len(batch):
            self.sink.flush_all()
            raise EngineFailure(
                f"engine {self.ctx.engine.name!r} returned {len(generations)} outputs for {len(batch)} cases"
            )
        run = unit.arm_run
        reference = run.arm == self.ctx.matrix.control.name and run.replicate == 0 and run.attempt == 0
        control = {} if reference else control_tokens(self.ctx)
        rows = [
            result_row(case, gen, run, control.get(case.case_id))
            for case, gen in zip(batch, generations, strict=True)
            if case.case_id in unit.missing
        ]
        self.ctx.progress.advance(self.sink.add(run.arm, rows))

    def _lost(self, worker: Worker, unit: WorkUnit, queue: deque[WorkUnit], why: str) -> None:
        self.pool.lose(worker, why)
        again = unit.again(self.sink.have(), self.ctx.matrix.submit_size_for(unit.arm_run.arm))
        if again is None:
            return
        if again.tries > self.max_tries:
            self.sink.flush_all()
            raise EngineFailure(
                f"{unit.label} lost its Ray worker {again.tries} times ({why}); the rows stored are kept: "
                f"`kvgate run --resume {self.ctx.run_dir}`"
            )
        queue.appendleft(again)

    def _engine_failed(self, worker: Worker, unit: WorkUnit, index: int, exc: Exception) -> None:
        """Raise what the engine raised (a KvgateError as itself), with the rows received stored."""
        self.sink.flush_all()
        cause = getattr(exc, "cause", None) or exc
        if isinstance(cause, KvgateError):
            raise cause from None
        batches = unit.batches
        case = batches[index][0].case_id if index >= 0 and batches[index] else "(opening the session)"
        raise EngineFailure(
            f"engine {self.ctx.engine.name!r} failed in arm {unit.arm_run.label!r} on case {case}: "
            f"{type(cause).__name__}: {cause}; resume with `kvgate run --resume {self.ctx.run_dir}`"
        ) from None
