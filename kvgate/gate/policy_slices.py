"""Every slice and column a policy names must be one of the cases': checked before a run (against its
workload) and before a report (against the run's cases, for a `--policy` given to `kvgate report`).

A policy names slices (`critical`, `[slice_tau]`) as `column=value[/column=value]`. A typo there
(`task=suport`) would gate a slice with no case in it, inconclusive for ever, so before a run each name
is checked against the slice labels of the cases to run: an unknown column, a value no case has, or a
combination no case has is refused in one line with the closest column or value ("did you mean"). So
are a `cluster` column and a declared `strata` column the cases lack (`check_policy_columns`, which the
report makes too): a typo in `strata` gated no stratum (silently), one in `cluster` was refused by the
report, after every arm had generated.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Mapping

from kvgate.errors import BadInput
from kvgate.gate.policy import DEFAULT_STRATA, NO_CLUSTER, SPECIAL_SLICES, Policy, slice_terms

MAX_LISTED = 8
"""Values listed when no close one exists, at most."""
FIX = "correct `critical` or `[slice_tau]` in the policy"


def _listed(known: list[str]) -> str:
    return ", ".join(known[:MAX_LISTED]) + (", …" if len(known) > MAX_LISTED else "") or "none"


def _hint(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    if close:
        return f"(did you mean {close[0]!r}?)"
    return f"(it has: {_listed(known)})"


def _column_hint(name: str, columns: list[str]) -> str:
    """The closest column, if any, and the columns there are."""
    close = difflib.get_close_matches(name, columns, n=1, cutoff=0.5)
    return (f"(did you mean {close[0]!r}? " if close else "(") + f"its slice columns: {_listed(columns)})"


def check_policy_columns(policy: Policy, columns: Collection[str], where: str) -> None:
    """BadInput naming the first column `policy` names (its `cluster`, a declared `strata` column, a
    column of a slice it names) that is none of `columns` (the cases' slice columns, task included), and
    the columns there are. `where`: the cases, for the message ("workload W", "run R")."""
    known = list(columns)
    declared = [("cluster", policy.cluster)] if policy.cluster not in ("prefix_group", NO_CLUSTER) else []
    if policy.strata != DEFAULT_STRATA:  # the default gates the buckets of a workload that has them
        declared += [("strata", column) for column in policy.strata]
    for key, column in declared:
        if column not in known:
            raise BadInput(
                f"policy {key} {column!r}: {where} has no slice column {column!r} "
                f"{_column_hint(column, known)}: correct `{key}` in the policy"
            )
    for name in policy.named_slices:
        if name in SPECIAL_SLICES:
            continue
        for column, _ in slice_terms(name):
            if column not in known:
                raise BadInput(
                    f"policy slice {name!r}: {where} has no slice column {column!r} "
                    f"{_column_hint(column, known)}: {FIX}"
                )


def check_policy_slices(policy: Policy, labels: Iterable[Mapping[str, str]], where: str) -> None:
    """`check_policy_columns`, then BadInput naming the first slice of `policy` that no case of `labels`
    (per case: its slice labels, task included) belongs to. `where`: the workload, for the message."""
    rows = list(labels)
    values: dict[str, set[str]] = {}
    for row in rows:
        for column, value in row.items():
            values.setdefault(column, set()).add(value)
    check_policy_columns(policy, sorted(values), where)
    for name in policy.named_slices:
        if name in SPECIAL_SLICES:
            continue
        terms = slice_terms(name)
        for column, value in terms:
            if value not in values[column]:
                raise BadInput(
                    f"policy slice {name!r}: no case of {where} has {column}={value!r} "
                    f"{_hint(value, sorted(values[column]))}: {FIX}"
                )
        if not any(all(row.get(c) == v for c, v in terms) for row in rows):
            raise BadInput(f"policy slice {name!r}: no case of {where} has all of its values at once: {FIX}")
