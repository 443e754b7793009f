"""Executors by name (a `kvgate.registry.Registry` of records): where a run's rows are generated. Each
executor class is imported only when chosen (`ray` needs the `ray` extra), and reads its own name from
the table (`name = EXECUTORS.name_of(f"{__module__}:{__qualname__}")`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvgate.errors import BadInput
from kvgate.registry import Registry, load

if TYPE_CHECKING:
    from kvgate.runner.context import Executor


@dataclass(frozen=True)
class ExecutorInfo:
    factory: str
    """"module:Class" of an `Executor`, built with (address, workers) when it joins a cluster, else ()."""
    joins_cluster: bool = False
    """Whether it runs on a Ray cluster's workers (`--ray-address`, `--ray-workers`: docs/ray.md)."""


EXECUTORS: Registry[ExecutorInfo] = Registry(
    "executor",
    records={
        "local": ExecutorInfo("kvgate.executors.local:LocalExecutor"),
        "ray": ExecutorInfo("kvgate.executors.ray_executor:RayExecutor", joins_cluster=True),
    },
)
DEFAULT_EXECUTOR = EXECUTORS.names()[0]
"""This process: the table's first."""


def executor_for(name: str, address: str | None = None, workers: int | None = None) -> Executor:
    """The executor called `name`; `address` and `workers` are the Ray cluster's (an executor that joins
    one only)."""
    info = EXECUTORS[name]
    if info.joins_cluster:
        joined: Executor = load(info.factory)(address, workers)
        return joined
    if address is not None or workers is not None:
        clusters = " or ".join(n for n, i in EXECUTORS.items() if i.joins_cluster)
        raise BadInput(f"--ray-address and --ray-workers need --executor {clusters}")
    executor: Executor = load(info.factory)()
    return executor
