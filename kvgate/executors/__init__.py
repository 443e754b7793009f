"""Executors: where a run's rows are generated. `local` (this process, the default) or `ray` (the
workers of a Ray cluster, imported only when chosen). Both keep one writer of the run's store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kvgate.engines.base import Engine
from kvgate.errors import BadInput
from kvgate.models import ModelSpec
from kvgate.runner.run import RunContext

EXECUTORS = ("local", "ray")


class Executor(Protocol):
    name: str

    def create_engine(self, name: str, model: ModelSpec, options: dict[str, Any]) -> Engine:
        """The run's engine (for `ray`, a proxy whose answers come from a worker)."""
        ...

    def execute(self, ctx: RunContext, driver: Callable[[RunContext], None] | None = None) -> None:
        """Generate every missing row of the run (with `driver`, e.g. the sequential one, if given)."""
        ...


def executor_for(name: str, address: str | None = None, workers: int | None = None) -> Executor:
    """The executor called `name`; `address` and `workers` are the Ray cluster's (ray only)."""
    if name == "local":
        if address is not None or workers is not None:
            raise BadInput("--ray-address and --ray-workers need --executor ray")
        from kvgate.executors.local import LocalExecutor

        return LocalExecutor()
    if name == "ray":
        from kvgate.executors.ray_executor import RayExecutor

        return RayExecutor(address, workers)
    raise BadInput(f"unknown executor {name!r}; known: {', '.join(EXECUTORS)}")
