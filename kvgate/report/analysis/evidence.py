"""What an arm's cache-induced failures looked like and what the arm buys, from the stored rows.

The measurements (KV entries kept, TTFT, latency) of each arm's first attempts of replicate 0 come from
the rows `run_data` read with the verdicts, and so do the texts of the failing cases (answers, the
validator's detail, first divergent token: analysis.row_texts), shown with the workload's expected
answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kvgate.arrow_numpy import int64_array
from kvgate.report.analysis.numbers import finite, ratio
from kvgate.report.analysis.run_data import CaseTable, RunRows
from kvgate.workload.case import SOURCE_ID
from kvgate.workload.taken_rows import take_rows

TEXT = ["output_text", "detail", "fail_kind", "first_divergence"]
"""A row's columns an example shows (RunRows.texts)."""
WORKLOAD_COLUMNS = ("expected", "messages", SOURCE_ID)
"""The workload's columns an example shows (read together, `Evidence.workload_columns`)."""
SNIPPET = 80
"""Characters of a failing case's question shown beside it."""


@dataclass(frozen=True)
class ArmExtras:
    """One arm's first attempts of replicate 0 over the run's cases: its measurements, and each case's
    row (its index in RunRows, −1: none) for its texts."""

    row: np.ndarray
    kept: np.ndarray
    """int64, −1 where unknown; likewise `kv_bytes`, the KV bytes the engine counted."""
    kv_bytes: np.ndarray
    ttft: np.ndarray
    latency: np.ndarray
    """float64, NaN where unknown."""


def extras_from_rows(rows: RunRows, arm: str) -> ArmExtras:
    """`arm`'s measurements placed by case position, from the rows the report has read already."""
    n = rows.n
    row = np.full(n, -1, dtype=np.int64)
    kept, ttft, latency = np.full(n, -1, dtype=np.int64), np.full(n, np.nan), np.full(n, np.nan)
    kv = np.full(n, -1, dtype=np.int64)
    if arm in rows.arm_names:
        index, pos = rows.first_attempts(arm)
        row[pos] = index
        kept[pos], ttft[pos], latency[pos] = rows.kv_kept[index], rows.ttft[index], rows.latency[index]
        kv[pos] = rows.kv_bytes[index]
    return ArmExtras(row, kept, kv, ttft, latency)


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
    """KV entries the candidate keeps (% of the control's), the KV bytes the engine counted for both
    (`measured_kv_bytes`) and its TTFT and latency against the control's, over `pairs` (cases with a
    verdict in both arms)."""
    known = pairs & (control.kept > 0) & (candidate.kept >= 0)
    per_case = candidate.kept[known] / control.kept[known]
    return {
        "measured_kv_bytes": measured_kv_bytes(control, candidate, pairs),
        "n_pairs": int(pairs.sum()),
        "kv_kept": ratio(int(candidate.kept[known].sum()), int(control.kept[known].sum())),
        "kv_kept_median": float(np.median(per_case)) if per_case.size else None,
        "kv_pairs": int(known.sum()),
        "ttft_s": _timing(control.ttft, candidate.ttft, pairs),
        "latency_s": _timing(control.latency, candidate.latency, pairs),
    }


def measured_kv_bytes(control: ArmExtras, candidate: ArmExtras, pairs: np.ndarray) -> dict[str, Any] | None:
    """The KV bytes the engine counted for the candidate and the control over the pairs where it counted
    both: totals, their share, and the bytes per prompt entry each keeps. None where it counted none."""
    known = pairs & (control.kv_bytes > 0) & (candidate.kv_bytes >= 0)
    if not known.any():
        return None
    mine, theirs = int(candidate.kv_bytes[known].sum()), int(control.kv_bytes[known].sum())
    kept, base = candidate.kept[known], control.kept[known]
    return {
        "pairs": int(known.sum()),
        "bytes": mine,
        "control_bytes": theirs,
        "share": mine / theirs,
        "bytes_per_entry": mine / int(kept.sum()) if kept.sum() > 0 else None,
        "control_bytes_per_entry": theirs / int(base.sum()) if base.sum() > 0 else None,
    }


ELEMENT_BITS = {"float32": 32, "bfloat16": 16, "float16": 16, "fp8_e4m3": 8, "fp8_e5m2": 8}


def kv_bytes(
    kv_kept: float | None,
    spec: dict[str, Any],
    engine_dtype: str | None,
    measured: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The candidate's KV bytes as a share of the control's: as the engine counted them (`measured`:
    "engine"), else
    entries kept times the bits of each stored element the spec implies ("spec": FP8 parts store 8 bits,
    the control the engine's dtype; scales and block padding left out). None when neither is known."""
    if measured is not None:
        return {"share": measured["share"], "source": "engine", "bits": None, "control_bits": None}
    control_bits = ELEMENT_BITS.get(engine_dtype or "")
    if kv_kept is None or control_bits is None:
        return None
    bits = control_bits
    for part in spec.get("of") or [spec]:
        if part.get("kind") == "quantize":
            bits = min(bits, ELEMENT_BITS.get(part.get("dtype", ""), bits))
    share = kv_kept * bits / control_bits
    return {"share": share, "source": "spec", "bits": bits, "control_bits": control_bits}


class Evidence:
    """The run's extra columns, read per arm on first use (the control's once for every arm)."""

    def __init__(self, run_dir: Path, cases: CaseTable, workload_path: str | None, rows: RunRows) -> None:
        self.run_dir = run_dir
        self.cases = cases
        self.workload_path = workload_path
        self.rows = rows
        self._arms: dict[str, ArmExtras] = {}
        self._failures: dict[tuple[str, str, int], dict[str, Any]] = {}
        self._outputs: dict[tuple[str, int], str | None] = {}
        """(control, case position) → the control's answer, read once for every candidate."""
        """(control, candidate, case position) → its example, read once however often it is asked for
        (a sequential report asks at every look)."""

    def arm(self, name: str) -> ArmExtras:
        if name not in self._arms:
            self._arms[name] = extras_from_rows(self.rows, name)
        return self._arms[name]

    def workload_columns(self, names: Sequence[str], where: np.ndarray) -> dict[str, list[Any]]:
        """The workload's columns `names` (of WORKLOAD_COLUMNS) at case positions `where`: taken at the
        rows the run selected (CaseTable.workload_rows) where the file's case ids there are the cases',
        else joined by case id (None where the file lacks the case); every value None where the workload
        cannot be read or has no such column.

        Read once for the cases an example may show (those of the rows whose texts the read kept:
        every row that did not pass) and any others asked for, and only those rows of the file are kept
        (workload.taken_rows): the columns whole are ~50 MB of fresh pages at 250,000 cases."""
        where = np.asarray(where, dtype=np.int64)
        if not where.size:
            return {name: [] for name in names}
        if not _covers(self._read[0], where):
            self._read = self._read_at(np.union1d(self._read[0], where))
        have, values = self._read
        at = np.searchsorted(have, where).tolist()
        return {name: [values[name][i] for i in at] if name in values else [None] * len(at) for name in names}

    def workload_column(self, name: str, where: np.ndarray) -> list[Any]:
        """`workload_columns` of one column."""
        return self.workload_columns([name], where)[name]

    @cached_property
    def _read(self) -> tuple[np.ndarray, dict[str, list[Any]]]:
        """(case positions, ascending; WORKLOAD_COLUMNS at them): first those of the kept rows."""
        kept = self.rows.kept.rows if self.rows is not None else np.zeros(0, dtype=np.int64)
        return self._read_at(np.unique(self.rows.case[kept]) if kept.size else kept)

    def _read_at(self, where: np.ndarray) -> tuple[np.ndarray, dict[str, list[Any]]]:
        if not self.workload_path or not where.size:
            return where, {}
        try:
            with pq.ParquetFile(self.workload_path) as workload:
                names = [n for n in WORKLOAD_COLUMNS if n in workload.schema_arrow.names]
                return where, self._taken(workload, names, where) if names else {}
        except (OSError, pa.ArrowException, KeyError, IndexError):
            return where, {}

    def _taken(self, workload: pq.ParquetFile, names: list[str], where: np.ndarray) -> dict[str, list[Any]]:
        wanted = self.cases.case_ids.take(int64_array(where))
        rows = self.cases.workload_rows[where]
        if int(rows.max()) < workload.metadata.num_rows:
            table = take_rows(workload, ["case_id", *names], rows)
            same = pc.equal(table["case_id"], wanted)
            if same.null_count == 0 and pc.all(same).as_py():
                return {name: table[name].to_pylist() for name in names}
        table = workload.read(columns=["case_id", *names], use_threads=False)  # rows moved: by case id
        at = pc.index_in(wanted, value_set=table["case_id"].combine_chunks())
        return {name: table[name].take(at).to_pylist() for name in names}

    def failures(self, control: str, candidate: str, mask: np.ndarray) -> list[dict[str, Any]]:
        """Every case in `mask` (cache-induced failures), in case order: what was expected, both answers,
        the validator's detail and the first output token where the candidate left the control."""
        every = np.nonzero(mask)[0].tolist()
        where = np.array([p for p in every if (control, candidate, p) not in self._failures], dtype=np.int64)
        if where.size:
            for pos, example in zip(where.tolist(), self._examples(control, candidate, where), strict=True):
                self._failures[control, candidate, pos] = example
        return [self._failures[control, candidate, p] for p in every]

    def _control_outputs(self, control: str, extras: ArmExtras, where: np.ndarray) -> list[str | None]:
        """The control's answers at `where`, reading only the output column of the parts not read yet."""
        unread = np.array([p for p in where.tolist() if (control, p) not in self._outputs], dtype=np.int64)
        if unread.size:
            read = self.rows.texts(extras.row[unread], ["output_text"])["output_text"]
            self._outputs.update(((control, p), t) for p, t in zip(unread.tolist(), read, strict=True))
        return [self._outputs[control, p] for p in where.tolist()]

    def _examples(self, control: str, candidate: str, where: np.ndarray) -> list[dict[str, Any]]:
        ctl, cand = self.arm(control), self.arm(candidate)
        ids = self.cases.case_ids.take(int64_array(where)).to_pylist()
        columns = self.workload_columns(["expected", SOURCE_ID, "messages"], where)
        expected, source_ids = columns["expected"], columns[SOURCE_ID]
        prompts = [prompt_snippet(m) for m in columns["messages"]]
        ctl_text = self._control_outputs(control, ctl, where)
        cand_rows = self.rows.texts(cand.row[where], TEXT)
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
                    "source_id": source_ids[j],
                    "prompt": prompts[j],
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


def _covers(have: np.ndarray, where: np.ndarray) -> bool:
    """Whether every one of `where` is in `have` (ascending, distinct)."""
    if not have.size:
        return False
    at = np.searchsorted(have, where)
    return bool((at < have.size).all()) and np.array_equal(have[at], where)


def prompt_snippet(messages: str | None, width: int = SNIPPET) -> str | None:
    """The start of the case's last user message (its question, in a trace: what was asked), on one
    line and cut to `width` characters; None when the workload holds no messages for it."""
    if messages is None:
        return None
    try:
        chat = json.loads(messages)
        text = next(m.get("content", "") for m in reversed(chat) if m.get("role") == "user")
    except (ValueError, StopIteration, AttributeError, TypeError):
        return None
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _decoded(expected: str | None) -> Any:
    """The workload stores the expected answer as JSON (a string, or a list of strings)."""
    if expected is None:
        return None
    try:
        return json.loads(expected)
    except ValueError:
        return expected
