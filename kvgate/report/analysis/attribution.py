"""Attribution of a composite arm's cache-induced failures to its parts (docs/gate.md, "In the report").

For D = B + C run beside B and C alone: each case the control passes and D fails is classed by which
parts fail it on their own: one part (that part's kind, e.g. "eviction" or "quantize"), more than one
("both", or "several" for three or more parts), or none ("interaction": only the combination fails).
A case some part has no verdict for (missing, engine error) is "unattributed".

Each class also gets its rate among the composite's control passes with a two-sided exact interval at
the policy's confidence: a class whose interval reaches down to the A/A noise floor may be noise (a part
that fails a case by chance, or an "interaction" that is the engine's own flip).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvgate.report.analysis.numbers import finite, ratio
from kvgate.report.analysis.run_data import ArmRows
from kvgate.stats.intervals import cp_bounds


def part_arms(
    spec: dict[str, Any], arms: dict[str, dict[str, Any]]
) -> tuple[list[tuple[str, str]], list[str]]:
    """The composite's parts that ran as arms of their own, as (arm, kind), and the names of those that
    did not.

    A part matches an arm with the same resolved spec; failing that, the same spec under another name.
    """
    found, missing = [], []
    for part in spec.get("of", []):
        unnamed = {k: v for k, v in part.items() if k != "name"}
        match = next((a for a, info in arms.items() if info["spec"] == part), None)
        if match is None:
            match = next(
                (
                    a
                    for a, info in arms.items()
                    if {k: v for k, v in info["spec"].items() if k != "name"} == unnamed
                ),
                None,
            )
        if match is None:
            missing.append(str(part.get("name")))
        else:
            found.append((match, str(part["kind"])))
    return found, missing


def attribute(failures: np.ndarray, parts: list[tuple[str, str, ArmRows]]) -> dict[str, int]:
    """Class counts over the composite's cache-induced failures (`failures`: per-case bool)."""
    failures = np.asarray(failures, dtype=bool)
    known = np.ones_like(failures)
    failing = np.zeros(failures.shape, dtype=np.int64)
    only = {}
    for _, kind, rows in parts:
        fails = rows.usable & ~rows.passed
        known &= rows.usable
        failing += fails
        only[kind] = fails
    usable = failures & known
    classes = {kind: int(np.count_nonzero(usable & fails & (failing == 1))) for kind, fails in only.items()}
    classes["both" if len(parts) == 2 else "several"] = int(np.count_nonzero(usable & (failing >= 2)))
    classes["interaction"] = int(np.count_nonzero(usable & (failing == 0)))
    classes["unattributed"] = int(np.count_nonzero(failures & ~known))
    return classes


def class_intervals(classes: dict[str, int], control_passes: int, confidence: float) -> dict[str, Any]:
    """Per class: its rate among the control passes and a two-sided exact interval at `confidence`."""
    names = list(classes)
    k = np.array([classes[c] for c in names], dtype=np.int64)
    n = np.full(k.shape, control_passes, dtype=np.int64)
    lower, upper = cp_bounds(k, n, (1 + confidence) / 2)
    return {
        c: {"rate": ratio(int(k[i]), control_passes), "lower": finite(lower[i]), "upper": finite(upper[i])}
        for i, c in enumerate(names)
    }


def attribution(
    spec: dict[str, Any],
    arms: dict[str, dict[str, Any]],
    failures: np.ndarray,
    rows_of: Any,
    control_passes: np.ndarray,
    confidence: float,
) -> dict[str, Any] | None:
    """The attribution block of a composite arm (None for other kinds). `rows_of(arm)` gives ArmRows;
    `control_passes`: per case, the control passes and the composite has a usable pair."""
    if spec.get("kind") != "composite":
        return None
    found, missing = part_arms(spec, arms)
    block: dict[str, Any] = {
        "parts": [{"arm": arm, "kind": kind} for arm, kind in found],
        "missing_parts": missing,
        "failures": int(np.count_nonzero(failures)),
        "classes": None,
        "control_passes": int(np.count_nonzero(control_passes)),
        "confidence": confidence,
        "intervals": None,
    }
    if not missing:
        block["classes"] = attribute(failures, [(arm, kind, rows_of(arm)) for arm, kind in found])
        block["intervals"] = class_intervals(block["classes"], block["control_passes"], confidence)
    return block
