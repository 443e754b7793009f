"""An arm's stress schedule (`arms[].stress`, analysis.stress) in one line of words, for every format."""

from __future__ import annotations

from kvgate.report.document.arm import Arm
from kvgate.report.document.stress import Load

UNLOADED = Load(concurrency=1, kv_blocks=None, abort_percent=0, interleave=False, resend_percent=0, repeat=1)
"""One request at a time on the engine's own pool, with no schedule."""


def stress_line(arm: Arm) -> str | None:
    """ "stress: concurrency 8, kv_blocks 16, 3 preemptions, 5 aborts · boundary cases 4 below, 4 at,
    4 above"; None when the arm ran one request at a time on the engine's own pool, with no schedule,
    no pass record and no boundary case (or the report is of an older shape)."""
    stress = arm.stress
    if stress is None:
        return None
    loaded = stress.load != UNLOADED
    edges = stress.boundary_cases
    if not (loaded or stress.counts or edges):
        return None
    line = f"stress: {stress.schedule}"
    if stress.counts:
        line += f" ({stress.counts.requests} requests)"
    if edges:
        line += f" · boundary cases {edges.below} below, {edges.at} at, {edges.above} above a block"
    return line
