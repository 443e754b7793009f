"""CFR against context length: one point per context bucket, placed at its median prompt length.

Buckets are the workload's `ctx_bucket` slices when it has them, else powers of two of the prompt length.
"""

from __future__ import annotations

import numpy as np

from kvgate.report.analysis.numbers import finite
from kvgate.report.analysis.run_data import CaseTable
from kvgate.report.analysis.slices import SliceGroup, column_group
from kvgate.report.document.findings import ContextPoint
from kvgate.stats.intervals import cp_bounds
from kvgate.stats.paired import N_OUTCOMES, PairedCounts, grouped_counts


def context_group(cases: CaseTable, prompt_tokens: np.ndarray) -> SliceGroup | None:
    """The bucket of each case; None when neither buckets nor prompt lengths are known."""
    if "ctx_bucket" in cases.labels:
        return column_group(cases, "ctx_bucket")
    known = prompt_tokens > 0
    if not known.any():
        return None
    exponent = np.where(known, np.floor(np.log2(np.maximum(prompt_tokens, 1))).astype(np.int64), -1)
    present = np.unique(exponent[known])
    remap = np.full(int(present.max()) + 2, -1, dtype=np.int64)
    remap[present] = np.arange(len(present))
    names = [f"{2 ** int(e)}–{2 ** (int(e) + 1) - 1}" for e in present]
    return SliceGroup(names, [{"prompt_tokens": n} for n in names], remap[exponent])


def by_context(
    group: SliceGroup | None, prompt_tokens: np.ndarray, outcomes: np.ndarray, confidence: float
) -> list[ContextPoint]:
    """Points (bucket, median prompt tokens, counts, CFR and bounds) in bucket order."""
    if group is None:
        return []
    counts = grouped_counts(group.codes, group.size, outcomes, N_OUTCOMES)
    paired = [PairedCounts.from_outcome_counts(row) for row in counts]
    k = np.array([p.cache_induced_failures for p in paired], dtype=np.int64)
    n = np.array([p.control_passes for p in paired], dtype=np.int64)
    lower, upper = cp_bounds(k, n, confidence)
    points = []
    for i, (name, p) in enumerate(zip(group.names, paired, strict=True)):
        tokens = prompt_tokens[(group.codes == i) & (prompt_tokens > 0)]
        points.append(
            ContextPoint(
                bucket=next(iter(group.labels[i].values()), name),
                prompt_tokens=float(np.median(tokens)) if tokens.size else None,
                n_pairs=p.n_pairs,
                control_passes=p.control_passes,
                cache_induced_failures=p.cache_induced_failures,
                cfr=p.cfr,
                cfr_lower=finite(lower[i]),
                cfr_upper=finite(upper[i]),
            )
        )
    return points
