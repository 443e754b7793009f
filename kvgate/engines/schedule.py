"""Stress schedules: the order of requests a session sends for one batch, what it counts, what it keeps.

KV-cache defects show under cancellation, reordering and churn: an asynchronous store reading blocks
the scheduler already gave another request after a preemption or an abort; a request that comes back
under the same request id; blocks of one namespace served to another; a block evicted and reloaded; a
cache that degrades only on a second run. The matrix's `[load]` (docs/reference.md, "Stress
schedules") declares, per run or per arm:

- `abort_percent`: a seeded share of the batch's cases is sent first and cancelled mid-generation,
  then sent again (the same prompt and namespace, and the same request id where the API takes one);
- `interleave`: before the arm's measured requests (namespace A), the batch's prompts are sent under
  another namespace B: A → B → A; A's answers must not change, B must not read A's blocks;
- `resend_percent`: after the batch is answered, other prompts churn the cache (evicting the batch's
  blocks under pressure) and a seeded share of the cases is sent again: the answer after the churn is
  the one kept, so a lossless arm's comparison with its control sees any change;
- `repeat`: the batch is generated `repeat` times (a soak), churn between repeats; a case keeps the
  first repeat whose tokens differ from the first repeat's (else the first), for the same reason.

Cases are chosen by a hash of the matrix's seed, the schedule and the case id, so every arm of a run
aborts and re-sends the same cases. A session implements `ScheduledOps`; `run_schedule` drives it and
adds to its `ScheduleCounts`, which the session stores in its pass record (`server/record.py`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from kvgate.engines.base import ArmSetup, Generation
from kvgate.treatments.matrix import LOAD_DEFAULTS
from kvgate.workload.case import Case


@dataclass
class ScheduleCounts:
    """What a pass's schedules did, summed over its batches (all kept in the pass record)."""

    aborts: int = 0
    """Requests cancelled mid-generation (then sent again)."""
    interleaved: int = 0
    """Requests sent under the other namespace between the arm's own."""
    churned: int = 0
    """Requests sent to churn the cache (before a re-send and between repeats)."""
    resent: int = 0
    """Cases sent again after the churn."""
    resend_changed: int = 0
    """Re-sent cases whose answer after the churn differs from the one before."""
    repeats: int = 0
    """Generations of a case beyond its first in a soak (`repeat` − 1 per case)."""
    repeat_changed: int = 0
    """Cases whose repeats did not all answer the same tokens."""

    def as_record(self) -> dict[str, int]:
        return asdict(self)


class ScheduledOps(Protocol):
    """What a session does for `run_schedule`: measure cases (`warm`: a reuse arm's warm-up first),
    abort them, send them under the other namespace, and churn the cache."""

    def measure(self, cases: Sequence[Case], warm: bool) -> list[Generation]: ...

    def abort(self, cases: Sequence[Case]) -> int:
        """Send each case and cancel it mid-generation; how many were cancelled before their answer."""
        ...

    def interleave(self, cases: Sequence[Case]) -> None: ...

    def churn(self, cases: Sequence[Case]) -> int:
        """Push other prompts through the cache; how many requests that took."""
        ...


def chosen(schedule: str, setup: ArmSetup, case_id: str, percent: int) -> bool:
    """Whether `schedule` at `percent` touches `case_id`: a hash of the run's seed, never of the arm."""
    if percent <= 0:
        return False
    digest = hashlib.sha256(f"{schedule}:{setup.seed}:{case_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < percent / 100


def aborted(setup: ArmSetup, case_id: str) -> bool:
    """Whether the abort schedule cancels `case_id`'s first request."""
    return chosen("abort", setup, case_id, setup.abort_percent)


def other_namespace(namespace: str) -> str:
    """Namespace B of the interleaving, never another arm's."""
    return f"{namespace}:interleaved"


def churn_namespace(namespace: str) -> str:
    return f"{namespace}:churn"


def schedule_load(setup: ArmSetup) -> dict[str, Any]:
    """The schedule keys `setup` runs under that differ from their defaults (as the manifest records)."""
    load = {
        "abort_percent": setup.abort_percent, "interleave": setup.interleave,
        "resend_percent": setup.resend_percent, "repeat": setup.repeat,
    }  # fmt: skip
    return {k: v for k, v in load.items() if v != LOAD_DEFAULTS[k]}


def schedule_words(load: dict[str, Any], counts: dict[str, int | None] | None) -> str:
    """The load an arm ran under, in words: its declared settings (`Matrix.load_for`, or a manifest
    arm entry's load keys) and what its pass records counted, e.g. "concurrency 8, kv_blocks 16,
    abort_percent 30, 12 preemptions, 5 aborts"."""
    words = [f"concurrency {load.get('concurrency', 1)}"]
    words += [
        f"{key} {str(value).lower()}"
        for key, value in load.items()
        if key in LOAD_DEFAULTS and key != "concurrency" and value != LOAD_DEFAULTS[key]
    ]
    counted = {k: v for k, v in (counts or {}).items() if v and k not in ("requests", "timeouts")}
    words += [f"{value} {key.replace('_', ' ')}" for key, value in counted.items()]
    return ", ".join(words)


def pass_attempt(setup: ArmSetup) -> int:
    """The pass's attempt number, read from its namespace (`…:a<attempt>`)."""
    tail = setup.namespace.rsplit(":a", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def scheduled(setup: ArmSetup) -> bool:
    """Whether `setup` runs any stress schedule."""
    return bool(setup.abort_percent or setup.interleave or setup.resend_percent or setup.repeat > 1)


def run_schedule(
    setup: ArmSetup, cases: Sequence[Case], ops: ScheduledOps, counts: ScheduleCounts
) -> list[Generation]:
    """The batch's generations under `setup`'s schedules (the module's docstring), one per case."""
    runs: list[list[Generation]] = []
    for repeat in range(max(1, setup.repeat)):
        if repeat:
            counts.churned += ops.churn(cases)
        if setup.interleave:
            ops.interleave(cases)
            counts.interleaved += len(cases)
        cancelled = [c for c in cases if aborted(setup, c.case_id)]
        if cancelled:
            counts.aborts += ops.abort(cancelled)
        generations = ops.measure(cases, warm=True)
        again = [i for i, c in enumerate(cases) if chosen("resend", setup, c.case_id, setup.resend_percent)]
        if again:
            counts.churned += ops.churn(cases)
            resent = ops.measure([cases[i] for i in again], warm=False)
            for index, generation in zip(again, resent, strict=True):
                counts.resent += 1
                counts.resend_changed += changed(generations[index], generation)
                generations[index] = generation
        runs.append(generations)
    counts.repeats += (len(runs) - 1) * len(cases)
    kept = []
    for per_case in zip(*runs, strict=True):
        differing = [g for g in per_case[1:] if changed(per_case[0], g)]
        counts.repeat_changed += bool(differing)
        kept.append(differing[0] if differing else per_case[0])
    return kept


def changed(before: Generation, after: Generation) -> bool:
    """Whether two answers to one case differ: their tokens, or one failed where the other did not."""
    return before.output_token_ids != after.output_token_ids or (before.error is None) != (
        after.error is None
    )
