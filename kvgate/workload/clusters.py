"""A workload's cluster structure: cases that share a `prefix_group` are one cluster for the gate.

The gate's bounds count a cluster of cases as correlated (docs/gate.md, "Clusters"), so one cluster
that holds a large share of the cases costs a slice most of its effective size: 20 requests that share a
system prompt are then worth about one independent case. `kvgate freeze` prints the structure it froze
and warns about every cluster over `LARGE_SHARE` of the cases.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kvgate.workload.case import Case

LARGE_SHARE = 0.2
"""A cluster holding more than this share of a workload's cases is warned about."""


@dataclass(frozen=True)
class ClusterStructure:
    cases: int
    groups: dict[str, int]
    """Prefix group → its cases, for groups of two or more cases, largest first."""
    alone: int
    """Cases in no prefix group, or alone in theirs: a cluster each."""
    where: dict[str, str]
    """Prefix group → "suite 'S', task 'T'" of its first case."""

    @property
    def clusters(self) -> int:
        return len(self.groups) + self.alone

    @property
    def largest(self) -> tuple[str | None, int]:
        """The largest prefix group and its case count ((None, 1) when every case is alone)."""
        return next(iter(self.groups.items()), (None, 1 if self.cases else 0))

    def large(self) -> list[tuple[str, int]]:
        """The prefix groups holding more than LARGE_SHARE of the cases."""
        return [(g, m) for g, m in self.groups.items() if m > LARGE_SHARE * self.cases]


def cluster_structure(cases: Sequence[Case]) -> ClusterStructure:
    sizes = Counter(c.prefix_group for c in cases if c.prefix_group)
    groups = {g: m for g, m in sorted(sizes.items(), key=lambda gm: (-gm[1], gm[0])) if m > 1}
    where: dict[str, str] = {}
    for c in cases:
        if c.prefix_group in groups and c.prefix_group not in where:
            where[c.prefix_group] = f"suite {c.suite!r}, task {c.task!r}"
    return ClusterStructure(len(cases), groups, len(cases) - sum(groups.values()), where)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _share(m: int, n: int) -> str:
    return f"{100 * m / n:.0f}%"


def describe(s: ClusterStructure) -> str:
    """One line, e.g. "300 cases in 110 clusters (10 prefix groups: 10 × 20 cases; 100 alone); the
    largest, prefix group 'trace-1a2b', holds 20 cases (7%)"."""
    if not s.groups:
        return (
            f"{_n(s.cases, 'case')} in {_n(s.clusters, 'cluster')} (no prefix groups: every case is its own)"
        )
    sizes = sorted(set(s.groups.values()), reverse=True)
    shapes = [f"{sum(1 for m in s.groups.values() if m == size)} × {size}" for size in sizes[:3]]
    counts = ", ".join(shapes + (["…"] if len(sizes) > 3 else []))
    name, m = s.largest
    return (
        f"{_n(s.cases, 'case')} in {_n(s.clusters, 'cluster')} ({_n(len(s.groups), 'prefix group')}: "
        f"{counts} cases; {s.alone} alone); the largest, prefix group {name!r}, holds {m} cases "
        f"({_share(m, s.cases)})"
    )


def warnings(s: ClusterStructure) -> list[str]:
    """One line per prefix group over LARGE_SHARE of the cases, naming it and what to do."""
    return [
        f"prefix group {name!r} ({s.where[name]}) holds {m} of {s.cases} cases ({_share(m, s.cases)}): "
        "the gate counts them as one cluster; if they only share a system prompt and fail independently, "
        'set cluster = "none" in the policy, or give the records distinct prefix groups (their own '
        '"prefix_group", or a [[trace]] prefix_min_tokens longer than the shared prompt); keep it when a '
        'reuse arm serves that prefix (docs/gate.md, "Clusters")'
        for name, m in s.large()
    ]
