"""Slices of a run's cases: every case, each value of each slice column, task × context bucket, the
critical cases, and any slice the policy names (`column=value[/column=value]`).

A slice group is one integer code per case (−1: outside every slice of the group), so the statistics of
all of a group's slices come from one bincount.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from kvgate.errors import BadInput
from kvgate.gate.policy import NO_CLUSTER, Policy, slice_terms
from kvgate.registry import unknown_name
from kvgate.report.analysis.run_data import CaseTable, own_codes_for_missing

ALL = "all"
CRITICAL = "critical"
NESTED = ("task", "ctx_bucket")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([kKmM]?)$")
_ORDINAL = {"start": 0, "early": 1, "middle": 2, "late": 3, "end": 4}


def value_order(value: str) -> tuple[int, float, str]:
    """Sort key for slice values: sizes by magnitude ("512" < "1k" < "16k"), start < end, else text."""
    m = _SIZE.match(value)
    if m:
        scale = {"": 1, "k": 1024, "m": 1024**2}[m.group(2).lower()]
        return (0, float(m.group(1)) * scale, value)
    if value in _ORDINAL:
        return (1, float(_ORDINAL[value]), value)
    return (2, 0.0, value)


@dataclass(frozen=True)
class SliceGroup:
    names: list[str]
    labels: list[dict[str, str]]
    codes: np.ndarray

    @property
    def size(self) -> int:
        return len(self.names)


def _name(labels: dict[str, str]) -> str:
    return "/".join(f"{c}={v}" for c, v in labels.items()) or ALL


def column_group(cases: CaseTable, column: str) -> SliceGroup:
    """One slice per value of `column`, in value order."""
    codes, values = cases.labels[column]
    order = sorted(range(len(values)), key=lambda i: value_order(values[i]))
    rank = np.empty(len(values) + 1, dtype=np.int64)
    rank[np.array(order, dtype=np.int64)] = np.arange(len(values))
    rank[-1] = -1
    labels = [{column: values[i]} for i in order]
    return SliceGroup([_name(lab) for lab in labels], labels, rank[codes])


def nested_group(cases: CaseTable, outer: str, inner: str) -> SliceGroup:
    """One slice per (outer, inner) value pair that occurs, outer-major in value order."""
    a, b = column_group(cases, outer), column_group(cases, inner)
    combined = np.where((a.codes >= 0) & (b.codes >= 0), a.codes * b.size + b.codes, -1)
    present = np.unique(combined[combined >= 0])
    remap = np.full(a.size * b.size + 1, -1, dtype=np.int64)
    remap[present] = np.arange(len(present))
    labels = [{**a.labels[int(p) // b.size], **b.labels[int(p) % b.size]} for p in present]
    return SliceGroup([_name(lab) for lab in labels], labels, remap[combined])


def named_slice(cases: CaseTable, name: str) -> SliceGroup:
    """The slice a policy names; an unknown column is bad input, an absent value an empty slice."""
    if name == ALL:
        return SliceGroup([ALL], [{}], np.zeros(cases.n, dtype=np.int64))
    if name == CRITICAL:
        return SliceGroup([CRITICAL], [{}], np.where(cases.critical, 0, -1))
    inside = np.ones(cases.n, dtype=bool)
    labels = {}
    for column, value in slice_terms(name):
        if column not in cases.labels:
            raise unknown_name("slice column in the policy", column, list(cases.slice_columns))
        codes, values = cases.labels[column]
        inside &= codes == (values.index(value) if value in values else -2)
        labels[column] = value
    return SliceGroup([name], [labels], np.where(inside, 0, -1))


def is_gated(name: str, policy: Policy) -> bool:
    """Whether a slice is in the gated family: `all`, `critical`, named by the policy, or a value of one of
    its strata columns (`ctx_bucket=4k`); else it is a signal."""
    return name in (ALL, CRITICAL) or name in policy.named_slices or policy.is_stratum(name)


def cluster_ids(cases: CaseTable, policy: Policy) -> tuple[np.ndarray, str]:
    """Per case, its cluster code under the policy's `cluster` column, and what the report calls it.

    "prefix_group": cases asked over one shared context; "none": every case alone; a slice column: its
    values (a case without one is alone). A name the workload lacks is bad input.
    """
    if policy.cluster == NO_CLUSTER:
        return np.arange(cases.n, dtype=np.int64), NO_CLUSTER
    if policy.cluster == "prefix_group":
        return cases.clusters, "prefix_group"
    if policy.cluster not in cases.labels:
        raise unknown_name(
            "cluster column in the policy", policy.cluster, ["prefix_group", NO_CLUSTER, *cases.labels]
        )
    codes, values = cases.labels[policy.cluster]
    return own_codes_for_missing(codes, len(values)), policy.cluster


def slice_groups(cases: CaseTable, policy: Policy) -> tuple[list[SliceGroup], list[str]]:
    """The report's slice groups, and notes on policy-named slices that match no case.

    A critical slice the policy names is always kept (empty: inconclusive, never silently skipped); a
    slice with its own τ that matches no case is noted and not gated.
    """
    groups = [named_slice(cases, ALL)]
    groups += [column_group(cases, col) for col in cases.slice_columns]
    if all(col in cases.labels for col in NESTED):
        groups.append(nested_group(cases, *NESTED))
    if cases.critical.any():
        groups.append(named_slice(cases, CRITICAL))
    known = {name for g in groups for name in g.names}
    notes = []
    for name in policy.named_slices:
        try:
            slice_terms(name)
        except BadInput as exc:
            raise BadInput(f"policy: {exc}") from None
        if name in known:
            continue
        group = named_slice(cases, name)
        if not np.any(group.codes >= 0) and name not in policy.critical:
            notes.append(f"policy slice {name!r} matches no case of this run; its τ is not applied")
            continue
        groups.append(group)
        known.add(name)
    return groups, notes
