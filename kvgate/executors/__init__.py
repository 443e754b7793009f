"""Executors: where a run's rows are generated. `local` (this process, the default) or `ray` (the
workers of a Ray cluster, imported only when chosen). Both keep one writer of the run's store and
implement `runner.context.Executor`; the CLI chooses one and hands it to `runner.job.run_job`."""

from __future__ import annotations

from kvgate.errors import BadInput
from kvgate.runner.context import Executor

EXECUTORS = ("local", "ray")


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
