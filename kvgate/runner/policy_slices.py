"""Before a run: every slice the policy names must be one of the workload's, and every column it names
one of the workload's columns.

A policy names slices (`critical`, `[slice_tau]`) as `column=value[/column=value]`. A typo there
(`task=suport`) would gate a slice with no case in it, inconclusive for ever, so each name is checked
against the slice labels of the cases to run: an unknown column, a value no case has, or a combination
no case has is refused in one line with the closest column or value ("did you mean"). So are a
`cluster` column and a declared `strata` column the workload lacks: a typo in `strata` gated no stratum
(silently), one in `cluster` was refused by the report, after every arm had generated.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from kvgate.errors import BadInput
from kvgate.gate.policy import DEFAULT_STRATA, NO_CLUSTER, SPECIAL_SLICES, Policy, slice_terms

MAX_LISTED = 8
"""Values listed when no close one exists, at most."""
FIX = "correct `critical` or `[slice_tau]` in the policy"


def _hint(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    if close:
        return f"(did you mean {close[0]!r}?)"
    shown = ", ".join(known[:MAX_LISTED]) + (", …" if len(known) > MAX_LISTED else "")
    return f"(it has: {shown or 'none'})"


def check_policy_slices(policy: Policy, labels: Iterable[Mapping[str, str]], where: str) -> None:
    """BadInput naming the first slice of `policy` that no case of `labels` (per case: its slice
    labels, task included) belongs to. `where`: the workload, for the message."""
    rows = list(labels)
    values: dict[str, set[str]] = {}
    for row in rows:
        for column, value in row.items():
            values.setdefault(column, set()).add(value)
    declared = [("cluster", policy.cluster)] if policy.cluster not in ("prefix_group", NO_CLUSTER) else []
    if policy.strata != DEFAULT_STRATA:  # the default gates the buckets of a workload that has them
        declared += [("strata", column) for column in policy.strata]
    for key, column in declared:
        if column not in values:
            raise BadInput(
                f"policy {key} {column!r}: {where} has no slice column {column!r} "
                f"{_hint(column, sorted(values))}: correct `{key}` in the policy"
            )
    for name in policy.named_slices:
        if name in SPECIAL_SLICES:
            continue
        terms = slice_terms(name)
        for column, value in terms:
            if column not in values:
                raise BadInput(
                    f"policy slice {name!r}: {where} has no slice column {column!r} "
                    f"{_hint(column, sorted(values))}: {FIX}"
                )
            if value not in values[column]:
                raise BadInput(
                    f"policy slice {name!r}: no case of {where} has {column}={value!r} "
                    f"{_hint(value, sorted(values[column]))}: {FIX}"
                )
        if not any(all(row.get(c) == v for c, v in terms) for row in rows):
            raise BadInput(f"policy slice {name!r}: no case of {where} has all of its values at once: {FIX}")
