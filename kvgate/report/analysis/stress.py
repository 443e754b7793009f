"""Each arm's stress schedule in the report: the load it was declared to run under, what its pass
records counted, and the block-boundary cases it ran (docs/reference.md, "Stress schedules").

    {"load": {"concurrency": 8, "kv_blocks": 16, "abort_percent": 30, …every load key},
     "schedule": "concurrency 8, kv_blocks 16, abort_percent 30, 3 preemptions, 5 aborts",
     "counts": {"requests": …, "timeouts": …, "preemptions": … | null, "aborts": …, "interleaved": …,
                "churned": …, "resent": …, "resend_changed": …, "repeats": …, "repeat_changed": …}
               | null (no pass record: an engine that neither serves nor ran a schedule),
     "boundary_cases": {"below": n, "at": n, "above": n} | null (the workload has no block_edge column)}

Counts are the first pass's (replicate 0, attempt 0), summed over its sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from kvgate.engines.schedule import schedule_words
from kvgate.engines.server.record import first_pass_counts
from kvgate.report.analysis.run_data import ArmRows, CaseTable
from kvgate.treatments.matrix import LOAD_DEFAULTS
from kvgate.workload.generators.block_edges import EDGE_COLUMN, EDGES


def arm_load(entry: dict[str, Any]) -> dict[str, Any]:
    """Every load key of a manifest arm entry, the defaults filled in."""
    return {key: entry.get(key, default) for key, default in LOAD_DEFAULTS.items()}


def stress_reports(run_dir: Path, manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per arm of the manifest, its stress block without boundary cases (`with_boundaries` adds them)."""
    counts = first_pass_counts(run_dir)
    out = {}
    for arm, entry in manifest["arms"].items():
        load = arm_load(entry)
        out[arm] = {
            "load": load,
            "schedule": schedule_words(load, counts.get(arm)),
            "counts": counts.get(arm),
            "boundary_cases": None,
        }
    return out


def with_boundaries(
    stress: dict[str, Any] | None, cases: CaseTable | None, rows: Callable[[], ArmRows]
) -> Any:
    """`stress` with the arm's block-boundary cases counted (those of its rows present); `rows` is asked
    for only where the workload marks block edges (building an arm's rows scatters all of them)."""
    if stress is None or cases is None or EDGE_COLUMN not in cases.labels:
        return stress
    codes, values = cases.labels[EDGE_COLUMN]
    present = rows().present
    counted = {}
    for edge in EDGES:
        hit = codes == values.index(edge) if edge in values else np.zeros_like(present)
        counted[edge] = int(np.count_nonzero(hit & present))
    return {**stress, "boundary_cases": counted}
