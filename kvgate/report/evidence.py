"""What an arm's cache-induced failures looked like and what the arm buys, from the stored rows.

The statistics read only verdict columns (`run_data`); this module reads the rest of each result part
(output text, the validator's detail, KV entries kept, TTFT and latency) for the first attempt of
replicate 0, one arm's parts at a time, and the workload's expected answers for the failing cases only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kvgate.errors import BadInput
from kvgate.report.arrow_numpy import int64_array, to_numpy
from kvgate.report.numbers import finite, ratio
from kvgate.report.run_data import CaseTable
from kvgate.runner.store import part_paths

COLUMNS = [
    "case_id", "replicate", "attempt", "output_text", "detail", "fail_kind", "first_divergence",
    "n_kv_entries_kept", "ttft_s", "latency_s",
]  # fmt: skip


@dataclass(frozen=True)
class ArmExtras:
    """One arm's first attempts of replicate 0 over the run's cases (`row` −1: no row)."""

    table: pa.Table
    row: np.ndarray
    kept: np.ndarray
    """int64, −1 where unknown."""
    ttft: np.ndarray
    latency: np.ndarray
    """float64, NaN where unknown."""


def _read(path: Path) -> pa.Table:
    try:
        with pq.ParquetFile(path) as part:
            table = part.read(columns=COLUMNS, use_threads=False)
    except (OSError, pa.ArrowException, KeyError) as exc:
        raise BadInput(f"result part {path} is unreadable: {str(exc).splitlines()[0]}") from None
    first = (to_numpy(table["replicate"], 0, np.int64) == 0) & (to_numpy(table["attempt"], 0, np.int64) == 0)
    return table.take(int64_array(np.nonzero(first)[0])).drop(["replicate", "attempt"])


def arm_extras(run_dir: Path, arm: str, case_ids: pa.Array) -> ArmExtras:
    """`arm`'s extra columns, placed by case position (rows of cases outside the run are ignored)."""
    parts = [_read(p) for p in part_paths(run_dir) if p.parent.name == arm]
    if parts:
        table = pa.concat_tables(parts).combine_chunks()
    else:
        table = pa.table({"case_id": pa.array([], type=pa.string())})
    n = len(case_ids)
    row = np.full(n, -1, dtype=np.int64)
    kept = np.full(n, -1, dtype=np.int64)
    ttft = np.full(n, np.nan)
    latency = np.full(n, np.nan)
    if table.num_rows:
        pos = to_numpy(pc.index_in(table["case_id"], value_set=case_ids), -1, np.int64)
        ok = pos >= 0
        row[pos[ok]] = np.nonzero(ok)[0]
        kept[pos[ok]] = to_numpy(table["n_kv_entries_kept"], -1, np.int64)[ok]
        ttft[pos[ok]] = to_numpy(table["ttft_s"], np.nan, np.float64)[ok]
        latency[pos[ok]] = to_numpy(table["latency_s"], np.nan, np.float64)[ok]
    return ArmExtras(table, row, kept, ttft, latency)


def _spread(values: np.ndarray) -> dict[str, float | None]:
    values = values[np.isfinite(values)]
    if not values.size:
        return {"median": None, "p95": None}
    return {"median": float(np.median(values)), "p95": float(np.percentile(values, 95))}


def _timing(control: np.ndarray, candidate: np.ndarray, pairs: np.ndarray) -> dict[str, Any]:
    """Median and p95 of a timing over the pairs both arms measured, and candidate ÷ control of each."""
    both = pairs & np.isfinite(control) & np.isfinite(candidate) & (control > 0)
    c, x = _spread(control[both]), _spread(candidate[both])

    def over(key: str) -> float | None:
        before, after = c[key], x[key]
        return None if before is None or after is None or not before else finite(after / before)

    return {"n": int(both.sum()), "control": c, "candidate": x, "ratio": {k: over(k) for k in c}}


def gains(control: ArmExtras, candidate: ArmExtras, pairs: np.ndarray) -> dict[str, Any]:
    """KV entries the candidate keeps (% of the control's) and its TTFT and latency against the control's,
    over `pairs` (cases with a verdict in both arms)."""
    known = pairs & (control.kept > 0) & (candidate.kept >= 0)
    per_case = candidate.kept[known] / control.kept[known]
    return {
        "n_pairs": int(pairs.sum()),
        "kv_kept": ratio(int(candidate.kept[known].sum()), int(control.kept[known].sum())),
        "kv_kept_median": float(np.median(per_case)) if per_case.size else None,
        "kv_pairs": int(known.sum()),
        "ttft_s": _timing(control.ttft, candidate.ttft, pairs),
        "latency_s": _timing(control.latency, candidate.latency, pairs),
    }


class Evidence:
    """The run's extra columns, read per arm on first use (the control's once for every arm)."""

    def __init__(self, run_dir: Path, cases: CaseTable, workload_path: str | None) -> None:
        self.run_dir = run_dir
        self.cases = cases
        self.workload_path = workload_path
        self._arms: dict[str, ArmExtras] = {}

    def arm(self, name: str) -> ArmExtras:
        if name not in self._arms:
            self._arms[name] = arm_extras(self.run_dir, name, self.cases.case_ids)
        return self._arms[name]

    @cached_property
    def _expected(self) -> pa.Array | None:
        if not self.workload_path:
            return None
        try:
            with pq.ParquetFile(self.workload_path) as workload:
                table = workload.read(columns=["case_id", "expected"])
        except (OSError, pa.ArrowException, KeyError):
            return None
        index = pc.index_in(self.cases.case_ids, value_set=table["case_id"].combine_chunks())
        return table["expected"].combine_chunks().take(index)

    def failures(self, control: str, candidate: str, mask: np.ndarray) -> list[dict[str, Any]]:
        """Every case in `mask` (cache-induced failures), in case order: what was expected, both answers,
        the validator's detail and the first output token where the candidate left the control."""
        where = np.nonzero(mask)[0]
        if not where.size:
            return []
        ctl, cand = self.arm(control), self.arm(candidate)
        ids = self.cases.case_ids.take(int64_array(where)).to_pylist()
        expected = (
            self._expected.take(int64_array(where)).to_pylist() if self._expected else [None] * len(ids)
        )
        ctl_text = _column(ctl, "output_text", where)
        cand_rows = {
            c: _column(cand, c, where) for c in ("output_text", "detail", "fail_kind", "first_divergence")
        }
        out = []
        for j, pos in enumerate(where):
            labels = {
                col: values[codes[pos]]
                for col, (codes, values) in self.cases.labels.items()
                if codes[pos] >= 0
            }
            out.append(
                {
                    "case_id": ids[j],
                    "labels": labels,
                    "expected": _decoded(expected[j]),
                    "control_output": ctl_text[j],
                    "candidate_output": cand_rows["output_text"][j],
                    "detail": cand_rows["detail"][j],
                    "fail_kind": cand_rows["fail_kind"][j],
                    "first_divergence": cand_rows["first_divergence"][j],
                }
            )
        return out


def _decoded(expected: str | None) -> Any:
    """The workload stores the expected answer as JSON (a string, or a list of strings)."""
    if expected is None:
        return None
    try:
        return json.loads(expected)
    except ValueError:
        return expected


def _column(extras: ArmExtras, column: str, where: np.ndarray) -> list[Any]:
    """`column` of the rows at case positions `where` (None where the arm has no row)."""
    rows = extras.row[where]
    if column not in extras.table.column_names:
        return [None] * len(where)
    values = extras.table[column].combine_chunks().take(int64_array(np.maximum(rows, 0))).to_pylist()
    return [v if r >= 0 else None for v, r in zip(values, rows, strict=True)]
