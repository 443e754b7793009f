"""`kvgate run --executor ray`: one run's work units spread over the workers of a Ray cluster.

The driver (this process) resolves the run and holds its lock, plans the units, and is the only writer
of the run's store and manifest; workers only generate. The phases keep the local order's dependencies:
the control's first pass (every other pass is compared with its tokens), then every other first pass at
once, then every confirm-rerun at once. A resumed run (by either executor) plans only what is missing.
The engine is never loaded on the driver: refusals and the fingerprint come from the first worker.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from kvgate.engines.base import ArmSession, ArmSetup
from kvgate.engines.resources import engine_resources
from kvgate.errors import BadInput, EngineFailure, KvgateError
from kvgate.executors.ray_cluster import Cluster
from kvgate.executors.ray_dispatch import MAX_TRIES, Dispatcher
from kvgate.executors.ray_pool import Worker, WorkerPool
from kvgate.executors.registry import EXECUTORS
from kvgate.executors.row_sink import RowSink
from kvgate.executors.units import WorkUnit, plan_units
from kvgate.models import ModelSpec
from kvgate.rundir.hardware import run_kinds
from kvgate.rundir.manifest import write_manifest
from kvgate.rundir.store import compact, stored_keys
from kvgate.runner.context import Driver, RunContext
from kvgate.runner.control_check import refuse_unwinnable_on_control
from kvgate.runner.passes import ArmRun, candidate_only_failures, first_passes, rerun_pass
from kvgate.treatments.spec import Treatment

MAX_WORKERS = 1024
"""Most engines `--ray-workers` may ask for at once (more is a typo, not a cluster)."""


class RayEngine:
    """The run's engine as the driver sees it: every answer comes from a worker on the cluster."""

    def __init__(self, name: str, cluster: Cluster, pool: WorkerPool, probe: Worker) -> None:
        self.name, self.cluster, self.pool, self.probe = name, cluster, pool, probe

    def refusal(self, treatment: Treatment) -> str | None:
        ray = self.cluster.ray
        try:
            reason: str | None = ray.get(self.probe.actor.refusal.remote(treatment))
            return reason
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, KvgateError):
                raise exc.cause from None
            raise EngineFailure(f"engine {self.name!r} failed on a Ray worker: {exc.cause}") from None
        except ray.exceptions.RayError as exc:
            raise EngineFailure(f"the Ray worker checking the arms was lost: {type(exc).__name__}") from None

    def fingerprint(self) -> dict[str, Any]:
        assert self.pool.fingerprint is not None
        return self.pool.fingerprint

    def open(self, setup: ArmSetup) -> ArmSession:
        raise EngineFailure("the Ray executor opens sessions on its workers, not on the driver")

    def close(self) -> None:
        try:
            self.pool.close()
        finally:
            self.cluster.close()


class RayExecutor:
    """Generates a run on a Ray cluster (`address`, else RAY_ADDRESS, else a new local one).

    `workers`: how many engines to run at once (default: as many as the cluster's CPUs and GPUs hold);
    `cases_per_unit`: the size of a unit (default: about four units per worker and pass).
    """

    name = EXECUTORS.name_of(f"{__module__}:{__qualname__}")
    joins_cluster = EXECUTORS[name].joins_cluster

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        cases_per_unit: int | None = None,
        max_tries: int = MAX_TRIES,
    ) -> None:
        if workers is not None and not 1 <= workers <= MAX_WORKERS:
            raise BadInput(f"--ray-workers must be in [1, {MAX_WORKERS}], got {workers}")
        self.address = address
        self.workers = workers
        self.cases_per_unit = cases_per_unit
        self.max_tries = max_tries

    def create_engine(self, name: str, model: ModelSpec, options: dict[str, Any]) -> RayEngine:
        """Connect, start the workers and return the driver's proxy once the first one has loaded its
        engine (the others go on loading meanwhile)."""
        cluster = Cluster(self.address)
        try:
            total = cluster.total()
            resources = engine_resources(name, options, total.get("GPU", 0) > 0)
            for key, need in (("CPU", resources.num_cpus), ("GPU", resources.num_gpus)):
                if need > total.get(key, 0):
                    raise BadInput(
                        f"engine {name!r} needs {need:g} {key} per worker; the Ray cluster has "
                        f"{total.get(key, 0):g} in all (add nodes, or change -E device / parallel sizes)"
                    )
            pool = WorkerPool(cluster.ray, name, model, options, resources)
            pool.grow(self.target_workers(pool, total))  # engines load side by side
            while not pool.usable():
                pool.check_alive()
                starts = pool.starting()
                ready, _ = cluster.ray.wait(list(starts), num_returns=1, timeout=1.0)
                for ref in ready:
                    pool.started(starts[ref])
            return RayEngine(name, cluster, pool, pool.usable()[0])
        except BaseException:
            cluster.close()
            raise

    def target_workers(self, pool: WorkerPool, total: dict[str, Any]) -> int:
        """The workers asked for: `workers`, else as many as the cluster's resources hold (at least 1)."""
        if self.workers is not None:
            return self.workers
        res = pool.resources
        fits = [total.get("CPU", 0) / res.num_cpus if res.num_cpus else math.inf]
        if res.num_gpus:
            fits.append(total.get("GPU", 0) / res.num_gpus)
        return max(1, int(min(fits)))

    def describe(self, engine: RayEngine) -> dict[str, Any]:
        res = engine.pool.resources
        return {
            "kind": self.name,
            "address": engine.cluster.address,
            "workers": self.target_workers(engine.pool, engine.cluster.total()),
            "worker_resources": {"num_cpus": res.num_cpus, "num_gpus": res.num_gpus},
            "max_tries": self.max_tries,
        }

    def execute(self, ctx: RunContext, driver: Driver | None = None) -> None:
        """Generate every missing row of the run on the cluster."""
        engine = ctx.engine
        if driver is not None or not isinstance(engine, RayEngine):
            raise BadInput("the Ray executor runs a fixed matrix; a sequential policy needs --executor local")
        kinds = run_kinds(ctx.manifest)
        if len(kinds) == 1:  # a resumed run stays on the hardware its rows were generated on
            engine.pool.pin(next(iter(kinds)), ctx.manifest["engine"])
        ctx.manifest["executor"] = self.describe(engine)
        write_manifest(ctx.run_dir, ctx.manifest)
        ctx.done = stored_keys(ctx.run_dir)
        sink = RowSink(ctx)
        dispatcher = Dispatcher(ctx, engine.pool, sink, self.max_tries)
        target = self.target_workers(engine.pool, engine.cluster.total())
        try:
            passes = first_passes(ctx.matrix, ctx.cases)
            self._phase(ctx, dispatcher, target, passes[:1], "control")
            refuse_unwinnable_on_control(ctx.run_dir, ctx.matrix, ctx.cases, ctx.policy)
            ctx.control_tokens = None
            self._phase(ctx, dispatcher, target, passes[1:], "candidates")
            reruns = []
            control = ctx.matrix.control.name
            for candidate in ctx.matrix.candidates:
                failures = candidate_only_failures(ctx.run_dir, control, candidate.name)
                for attempt in range(1, ctx.matrix.confirm_reruns + 1):
                    rerun = rerun_pass(candidate, attempt, ctx.cases, failures)
                    if rerun is not None:
                        reruns.append(rerun)
            self._phase(ctx, dispatcher, target, reruns, "confirm-reruns")
        finally:
            try:
                sink.flush_all()
            finally:
                with contextlib.suppress(KvgateError):  # the unit counts only; the kinds were written
                    write_manifest(ctx.run_dir, ctx.manifest)

    def _phase(
        self, ctx: RunContext, dispatcher: Dispatcher, target: int, passes: list[ArmRun], label: str
    ) -> None:
        units: list[WorkUnit] = []
        for arm_run in passes:
            size = ctx.matrix.submit_size_for(arm_run.arm)
            units += plan_units(arm_run, ctx.done, size, target, self.cases_per_unit)
        dispatcher.pool.grow(min(target, len(units)))
        dispatcher.run(units, f"{label} ({len(units)} units on Ray)")
        dispatcher.sink.flush_all()
        for arm in sorted({p.arm for p in passes}):
            compact(ctx.run_dir, arm)
