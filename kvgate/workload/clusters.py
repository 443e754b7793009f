"""A workload's cluster structure: cases that share a `prefix_group` are one cluster for the gate.

The gate's bounds count a cluster of cases as correlated (docs/gate.md, "What counts as a cluster"), so
one cluster that holds a large share of the cases costs a slice most of its effective size: 20 requests
in one prefix group are worth about one independent case. Trace and data-set import make a shared
prefix one cluster only when it is at least `prefix_min_share` of the prompts (`prefix_groups`); the
prefixes they did not make clusters are named in the `shared_prefix` slice. `kvgate freeze` prints the
structure it froze and warns about every prefix group, and every shared prefix counted as independent
cases, over `LARGE_SHARE` of the cases.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kvgate.workload.case import Case
from kvgate.workload.prefix_groups import SHARED_PREFIX, shared_share

LARGE_SHARE = 0.2
"""A cluster holding more than this share of a workload's cases is warned about."""


@dataclass(frozen=True)
class SharedPrefix:
    """Cases that share a prompt prefix which import did not make one cluster (slice `shared_prefix`)."""

    cases: int
    clusters: int
    """The clusters the gate counts among them (each its own, unless a longer prefix groups some)."""
    share: float | None
    """Their shared prefix's share of their prompt tokens (None without token ids)."""
    where: str


@dataclass(frozen=True)
class ClusterStructure:
    cases: int
    groups: dict[str, int]
    """Prefix group → its cases, for groups of two or more cases, largest first."""
    alone: int
    """Cases in no prefix group, or alone in theirs: a cluster each."""
    where: dict[str, str]
    """Prefix group → "suite 'S', task 'T'" of its first case."""
    shares: dict[str, float | None]
    """Prefix group → its shared prefix's share of its cases' prompt tokens (None without token ids)."""
    shared: dict[str, SharedPrefix]
    """Shared prefix (slice `shared_prefix`) → its cases, largest first."""

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

    def large_shared(self) -> list[tuple[str, SharedPrefix]]:
        """The shared prefixes counted as independent cases that hold more than LARGE_SHARE of them."""
        return [(p, s) for p, s in self.shared.items() if s.cases > LARGE_SHARE * self.cases]


def _largest_first(sizes: Counter[str]) -> list[str]:
    return [name for name, _ in sorted(sizes.items(), key=lambda nm: (-nm[1], nm[0]))]


def _share_of(members: list[Case]) -> float | None:
    prompts = [c.prompt_token_ids for c in members]
    return None if any(p is None for p in prompts) else shared_share([p for p in prompts if p is not None])


def cluster_structure(cases: Sequence[Case]) -> ClusterStructure:
    sizes = Counter(c.prefix_group for c in cases if c.prefix_group)
    groups = {g: sizes[g] for g in _largest_first(sizes) if sizes[g] > 1}
    members: dict[str, list[Case]] = {g: [] for g in groups}
    by_prefix: dict[str, list[Case]] = {}
    for c in cases:
        if c.prefix_group in members:
            members[c.prefix_group].append(c)
        if c.slices.get(SHARED_PREFIX):
            by_prefix.setdefault(c.slices[SHARED_PREFIX], []).append(c)
    shared = {}
    for name in _largest_first(Counter({p: len(m) for p, m in by_prefix.items()})):
        own = by_prefix[name]
        in_groups = {c.prefix_group for c in own if c.prefix_group in groups}
        alone = sum(1 for c in own if c.prefix_group not in groups)
        shared[name] = SharedPrefix(len(own), len(in_groups) + alone, _share_of(own), _where(own[0]))
    return ClusterStructure(
        len(cases),
        groups,
        len(cases) - sum(groups.values()),
        {g: _where(m[0]) for g, m in members.items()},
        {g: _share_of(m) for g, m in members.items()},
        shared,
    )


def _where(case: Case) -> str:
    return f"suite {case.suite!r}, task {case.task!r}"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _case_share(m: int, n: int) -> str:
    return f"{100 * m / n:.0f}%"


def _percent(share: float | None) -> str:
    return "?" if share is None else f"{100 * share:.0f}%"


def describe(s: ClusterStructure) -> str:
    """One line, e.g. "300 cases in 110 clusters (10 prefix groups: 10 × 20 cases; 100 alone); the
    largest, prefix group 'trace-1a2b', holds 20 cases (7%)", then how many cases share a prefix that
    counts as no cluster."""
    return _groups(s) + "".join(
        f"; shared prefix {name!r}: {p.cases} cases counted as {_n(p.clusters, 'cluster')} "
        f"(it is {_percent(p.share)} of their prompts)"
        for name, p in list(s.shared.items())[:3]
    )


def _groups(s: ClusterStructure) -> str:
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
        f"({_case_share(m, s.cases)})"
    )


def warnings(s: ClusterStructure) -> list[str]:
    """One line per prefix group, and per shared prefix counted as independent cases, over LARGE_SHARE
    of the cases, naming it, how the gate counts it and how to count it the other way."""
    return [_group_warning(s, name, m) for name, m in s.large()] + [
        _shared_warning(s, name, p) for name, p in s.large_shared()
    ]


def _group_warning(s: ClusterStructure, name: str, m: int) -> str:
    share = s.shares[name]
    prefix = "" if share is None else f"; their shared prefix is {_percent(share)} of their prompts"
    return (
        f"prefix group {name!r} ({s.where[name]}) holds {m} of {s.cases} cases "
        f"({_case_share(m, s.cases)}{prefix}): the gate counts them as one cluster; if a fault in that "
        'prefix would not fail them together, set cluster = "none" in the policy, or give the records '
        'their own "prefix_group", or raise the [[trace]] prefix_min_share above that share; keep it when '
        'a reuse arm serves that prefix (docs/gate.md, "What counts as a cluster")'
    )


def _shared_warning(s: ClusterStructure, name: str, p: SharedPrefix) -> str:
    return (
        f"shared prefix {name!r} ({p.where}) holds {p.cases} of {s.cases} cases "
        f"({_case_share(p.cases, s.cases)}), but it is only {_percent(p.share)} of their prompts, under "
        f"prefix_min_share: the gate counts them as {_n(p.clusters, 'cluster')}, assuming a fault in that "
        "prefix fails them one by one; if it would fail them together (a reuse arm serves that prefix), "
        "set prefix_min_share = 0 in the suite's [[trace]] or [[dataset]] and freeze again (docs/gate.md, "
        '"What counts as a cluster")'
    )
