"""The cases a `--limit` run takes: spread evenly over the workload, so a short run samples all of it."""

from __future__ import annotations

from kvgate.workload.case import Case
from kvgate.workload.schema import Workload


def select_cases(workload: Workload, limit: int | None) -> tuple[Case, ...]:
    """`limit` cases spread evenly over the workload (all when None)."""
    cases = workload.cases
    if limit is None or limit >= len(cases):
        return cases
    step = len(cases) / limit
    return tuple(cases[int(i * step)] for i in range(limit))
