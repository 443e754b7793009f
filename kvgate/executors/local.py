"""The local executor: the run generated in this process, pass after pass (`runner.run.execute`).

A pass is not split into units here: each arm's hardware is recorded with 0 units."""

from __future__ import annotations

from typing import Any

from kvgate.engines.base import Engine
from kvgate.engines.registry import create_engine
from kvgate.executors.registry import EXECUTORS
from kvgate.models import ModelSpec
from kvgate.rundir.hardware import record_unit, this_machine
from kvgate.rundir.manifest import write_manifest
from kvgate.runner.context import Driver, RunContext
from kvgate.runner.run import execute


class LocalExecutor:
    """One engine in this process; every arm's rows are generated on this machine."""

    name = EXECUTORS.name_of(f"{__module__}:{__qualname__}")
    joins_cluster = EXECUTORS[name].joins_cluster

    def create_engine(self, name: str, model: ModelSpec, options: dict[str, Any]) -> Engine:
        return create_engine(name, model, **options)

    def execute(self, ctx: RunContext, driver: Driver | None = None) -> None:
        """Record this machine as every arm's hardware (a run whose rows were generated on another kind
        is refused here), then generate with `driver` (default: `execute`). The manifest is written only
        when that changes it: a resumed run with nothing to do changes no file."""
        machine = this_machine(ctx.engine.fingerprint())
        changed = ctx.manifest.get("executor") != {"kind": self.name}
        ctx.manifest["executor"] = {"kind": self.name}
        for arm in ctx.manifest["arms"]:
            changed |= record_unit(ctx.manifest, arm, machine, units=0)
        if changed:
            write_manifest(ctx.run_dir, ctx.manifest)
        (driver or execute)(ctx)
