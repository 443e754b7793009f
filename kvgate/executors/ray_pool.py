"""The run's Ray workers: actors created with the engine's resources, kept only on the run's hardware.

A worker is usable once its engine has loaded (`start` answered) with the run's engine fingerprint on
the run's hardware kind (the kind the run's rows were generated on so far, else the first worker's).
A worker on another kind or build is let go and never given a unit: its rows could not be paired with
the control's. A lost worker is replaced (Ray places the new one wherever the resources are).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from kvgate.engines.resources import Resources
from kvgate.errors import BadInput, EngineFailure, KvgateError
from kvgate.executors.ray_worker import EngineWorker
from kvgate.executors.units import WorkUnit
from kvgate.models import ModelSpec
from kvgate.rundir.hardware import describe_kind, kind_of

START_TIMEOUT_S = 900.0
"""How long the run waits for a first usable worker (engine loads included) before it gives up."""
log = logging.getLogger(__name__)


@dataclass(eq=False)
class Worker:
    """One actor; `unit` is the unit it runs, `refs` its calls not answered yet (by batch index,
    -1 for the session's opening)."""

    actor: Any
    start_ref: Any
    machine: dict[str, Any] | None = None
    unit: WorkUnit | None = None
    refs: dict[Any, int] = field(default_factory=dict)
    received: int = 0

    @property
    def idle(self) -> bool:
        return self.machine is not None and self.unit is None


class WorkerPool:
    """The actors holding the run's engine."""

    def __init__(self, ray: Any, engine: str, model: ModelSpec, options: dict[str, Any], res: Resources):
        self.ray = ray
        self.spec = (engine, model, options)
        self.resources = res
        self.workers: list[Worker] = []
        self.fingerprint: dict[str, Any] | None = None
        self.kind: tuple[str, str] | None = None
        self.refused: set[str] = set()
        self.since = time.monotonic()

    def spawn(self) -> Worker:
        actor_class = self.ray.remote(EngineWorker).options(
            num_cpus=self.resources.num_cpus, num_gpus=self.resources.num_gpus, max_restarts=0
        )
        actor = actor_class.remote(*self.spec)
        worker = Worker(actor, actor.start.remote())
        self.workers.append(worker)
        return worker

    def grow(self, target: int) -> None:
        """Ask for workers until `target` are usable or starting."""
        while len(self.workers) < target:
            self.spawn()

    def starting(self) -> dict[Any, Worker]:
        return {w.start_ref: w for w in self.workers if w.machine is None}

    def started(self, worker: Worker) -> bool:
        """Take `worker`'s start answer: True when it is usable; a start that failed on bad input or
        an engine failure raises it, a lost one is replaced, a worker of another kind is let go."""
        try:
            machine = self.ray.get(worker.start_ref)
        except self.ray.exceptions.RayTaskError as exc:
            self.close()
            cause = exc.cause
            if isinstance(cause, KvgateError):
                raise cause from None
            raise EngineFailure(
                f"engine {self.spec[0]!r} failed to start on a Ray worker: {type(cause).__name__}: {cause}"
            ) from None
        except self.ray.exceptions.RayError as exc:
            self.lose(worker, f"its start failed: {type(exc).__name__}")
            return False
        kind = kind_of(machine)
        if self.fingerprint is None:
            self.fingerprint = machine["fingerprint"]
        if self.kind is None:
            self.kind = kind
        if kind != self.kind or machine["fingerprint"] != self.fingerprint:
            shown = describe_kind(kind)
            self.refused.add(shown)
            log.warning(
                "a Ray worker on %s is let go: the run's rows are on %s", shown, describe_kind(self.kind)
            )
            self.drop(worker)
            return False
        worker.machine = machine
        return True

    def pin(self, kind: tuple[str, str], fingerprint: dict[str, Any]) -> None:
        """Use only workers of `kind` whose engine has `fingerprint` (a resumed run's)."""
        self.kind, self.fingerprint = kind, fingerprint
        for worker in list(self.workers):
            machine = worker.machine
            if machine is not None and (kind_of(machine) != kind or machine["fingerprint"] != fingerprint):
                self.refused.add(describe_kind(kind_of(machine)))
                self.drop(worker)

    def usable(self) -> list[Worker]:
        return [w for w in self.workers if w.machine is not None]

    def check_alive(self) -> None:
        """Raise when no worker is usable and none is starting, or none started in time."""
        if self.usable():
            self.since = time.monotonic()
            return
        if self.refused and not self.starting():
            kinds = ", ".join(sorted(self.refused))
            want = describe_kind(self.kind) if self.kind else "one kind"
            raise BadInput(f"no Ray worker runs on the run's hardware ({want}); found only {kinds}")
        if time.monotonic() - self.since > START_TIMEOUT_S:
            need = f"{self.resources.num_cpus:g} CPU and {self.resources.num_gpus:g} GPU each"
            raise EngineFailure(
                f"no Ray worker started within {START_TIMEOUT_S:.0f} s (workers need {need}; the cluster "
                f"has {self.ray.cluster_resources()})"
            )

    def lose(self, worker: Worker, why: str) -> None:
        """A worker whose process or node is gone: forget it and ask for another."""
        log.warning("a Ray worker was lost (%s); starting another", why)
        self.drop(worker)
        self.spawn()

    def drop(self, worker: Worker) -> None:
        if worker in self.workers:
            self.workers.remove(worker)
        with contextlib.suppress(Exception):  # already gone
            self.ray.kill(worker.actor, no_restart=True)

    def close(self) -> None:
        for worker in list(self.workers):
            self.drop(worker)
