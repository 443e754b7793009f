"""What generating a run is given, and the two seams above it (runner.job composes them).

- `RunContext`: the open run (its directory and manifest, the cases, the matrix, the policy, the
  engine) and what generation keeps while it goes (the stored keys, the control's tokens).
- `Driver`: generates a run's missing rows from its context: `runner.run.execute`, pass after pass, or
  `runner.sequential.execute_sequential`, look by look.
- `Executor`: where the rows are generated (`kvgate.executors`: this process, or a Ray cluster); the
  caller of `runner.job.run_job` chooses one, so the runner never imports the executors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kvgate.engines.base import Engine
from kvgate.gate.policy import Policy
from kvgate.models import ModelSpec
from kvgate.rundir.store import RowKey
from kvgate.treatments.matrix import Matrix
from kvgate.workload.case import Case
from kvgate.workload.schema import Workload


class Progress(Protocol):
    """Told each pass's size and advance (the CLI draws a bar on stderr)."""

    def start(self, label: str, total: int, done: int) -> None: ...

    def advance(self, n: int) -> None: ...

    def finish(self) -> None: ...


class NoProgress:
    """Progress that shows nothing."""

    def start(self, label: str, total: int, done: int) -> None:
        return None

    def advance(self, n: int) -> None:
        return None

    def finish(self) -> None:
        return None


@dataclass
class RunContext:
    """An open run, as the driver and the executor generate it."""

    run_dir: Path
    manifest: dict[str, Any]
    workload: Workload
    cases: tuple[Case, ...]
    matrix: Matrix
    policy: Policy
    engine: Engine
    progress: Progress = field(default_factory=NoProgress)
    done: set[RowKey] = field(default_factory=set)
    control_tokens: dict[str, list[int]] | None = None
    """The control's output tokens by case, read once its pass is complete."""


Driver = Callable[[RunContext], None]
"""Generates a run's missing rows (`runner.run.execute`, or the sequential driver)."""


class Executor(Protocol):
    """Where a run's rows are generated; it keeps one writer of the run's store."""

    name: str
    joins_cluster: bool
    """Whether its rows are generated on a cluster's workers (the executors table's record says)."""

    def create_engine(self, name: str, model: ModelSpec, options: dict[str, Any]) -> Engine:
        """The run's engine (for `ray`, a proxy whose answers come from a worker)."""
        ...

    def execute(self, ctx: RunContext, driver: Driver | None = None) -> None:
        """Generate every missing row of the run (with `driver`, e.g. the sequential one, if given)."""
        ...
