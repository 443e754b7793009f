"""Work units: a pass's missing rows split into pieces that workers generate apart.

A unit is one pass (arm, replicate, attempt) over a shard of its cases: whole batches of the pass, as
the local executor forms them, so every batch meets the engine as it would locally. A reuse arm's pass
is one unit (its outputs depend on the cache its earlier cases left): its batches replay history up to
the last one missing a row, as a local resume does. A unit given back by a lost worker is planned again
from what is stored by then: only its missing rows are generated again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kvgate.rundir.store import RowKey
from kvgate.runner.passes import ArmRun, reuses
from kvgate.runner.run import plan_batches
from kvgate.workload.case import Case

UNITS_PER_WORKER = 4
"""A pass is split into about this many units per worker, so the last units balance the load."""
MAX_UNIT_CASES = 256
"""A unit has at most this many cases (unless a batch is larger): a lost worker loses at most that."""


@dataclass(frozen=True)
class WorkUnit:
    """One pass over `batches` of its cases; rows are stored for the cases in `missing` only."""

    arm_run: ArmRun
    shard: int
    batches: tuple[tuple[Case, ...], ...]
    missing: frozenset[str]
    tries: int = 0
    """How often a worker was lost while running this unit."""

    @property
    def label(self) -> str:
        return f"{self.arm_run.label} unit {self.shard}"

    def key(self, case_id: str) -> RowKey:
        run = self.arm_run
        return (run.arm, run.replicate, case_id, run.attempt)

    def again(self, done: set[RowKey], batch_size: int) -> WorkUnit | None:
        """This unit for another worker after its worker was lost: only the rows not stored by now
        (a reuse arm replays its history again); None when none is missing."""
        missing = frozenset(c for c in self.missing if self.key(c) not in done)
        if not missing:
            return None
        if reuses(self.arm_run.treatment):
            batches = plan_batches(self.arm_run, set(missing), batch_size)
        else:
            batches = [[c for c in b if c.case_id in missing] for b in self.batches]
        kept = tuple(tuple(b) for b in batches if b)
        return replace(self, batches=kept, missing=missing, tries=self.tries + 1)


def unit_cases(n_missing: int, batch_size: int, workers: int) -> int:
    """Cases per unit: about UNITS_PER_WORKER units per worker, whole batches, at most MAX_UNIT_CASES."""
    target = -(-n_missing // max(1, workers * UNITS_PER_WORKER))
    batches = max(1, -(-min(target, MAX_UNIT_CASES) // batch_size))
    return batches * batch_size


def plan_units(
    arm_run: ArmRun, done: set[RowKey], batch_size: int, workers: int, cases_per_unit: int | None = None
) -> list[WorkUnit]:
    """The units generating the pass's rows not in `done` (none when all are stored)."""
    missing = {
        c.case_id
        for c in arm_run.kept()
        if (arm_run.arm, arm_run.replicate, c.case_id, arm_run.attempt) not in done
    }
    if not missing:
        return []
    batches: list[Sequence[Case]] = plan_batches(arm_run, missing, batch_size)
    if reuses(arm_run.treatment):
        return [WorkUnit(arm_run, 0, tuple(tuple(b) for b in batches), frozenset(missing))]
    size = cases_per_unit or unit_cases(len(missing), batch_size, workers)
    units: list[WorkUnit] = []
    shard: list[tuple[Case, ...]] = []
    for batch in batches:
        shard.append(tuple(batch))
        if sum(map(len, shard)) >= size:
            units.append(_unit(arm_run, len(units), shard))
            shard = []
    if shard:
        units.append(_unit(arm_run, len(units), shard))
    return units


def _unit(arm_run: ArmRun, shard: int, batches: list[tuple[Case, ...]]) -> WorkUnit:
    return WorkUnit(arm_run, shard, tuple(batches), frozenset(c.case_id for b in batches for c in b))
