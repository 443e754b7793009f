"""The texts of the rows a report shows, kept from its one read of the parts (analysis.run_data.RunRows).

A result row's `output_text` and `detail` are read with its verdict, and kept only where the report may
show them as a failing example: every row that did not pass, and the control's rows of the cases where
another arm's row did not pass (the control's answer shown beside the failing one). The candidates'
parts are read before the control's, so that the control's are read knowing those cases. Any other row's
texts (`kvgate report --samples` asks for every case's) are read from its part when asked for.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kvgate.arrow_numpy import int64_array, to_numpy
from kvgate.rundir.result_part import read_part

TEXT_COLUMNS = ("output_text", "detail")
"""Read with the verdicts; kept for the rows `failing` or `failing_or_of_cases` select."""

Keep = Callable[[pa.Table], np.ndarray]
"""A part's rows (with TEXT_COLUMNS) → which of them to keep the texts of (boolean per row)."""


def failing(part: pa.Table) -> np.ndarray:
    """Rows that did not pass (a null verdict counts as not passed)."""
    return ~to_numpy(part["passed"], False, bool)


def index_in(values: pa.Array, value_set: pa.Array) -> np.ndarray:
    """`pc.index_in(values, value_set=value_set)` as int64, −1 where absent (the first position where
    `value_set` holds a value twice), for a `value_set` much longer than `values`' distinct values (the
    run's case ids): pyarrow builds its hash table of the value set on every call (~40 ms for 250,000
    ids); this hashes the distinct values and looks each of the value set up in them once."""
    distinct = pc.unique(values)
    found = to_numpy(pc.index_in(value_set, value_set=distinct), -1, np.int64)
    at = np.flatnonzero(found >= 0)[::-1]
    where = np.full(len(distinct) + 1, -1, dtype=np.int64)  # the last: −1 for a value none matched
    where[found[at]] = at  # reversed: the first position is written last and kept
    return where[to_numpy(pc.index_in(values, value_set=distinct), len(distinct), np.int64)]


class CasePositions:
    """Each row's position among the run's cases (workload order), one part at a time: a part of
    consecutive cases (as runs write them) is placed by its first case and checked in one comparison,
    any other joined by hash. The first case is found by binary search over the ids sorted once in Arrow
    (no Python string per case: 250,000 ids sort in ~10 ms, where a dict of them took ~60)."""

    def __init__(self, case_ids: pa.Array) -> None:
        self.case_ids = case_ids
        self._order = pc.sort_indices(case_ids)
        self._sorted = _AsPython(case_ids.take(self._order))

    def start(self, case: str | None) -> int:
        """The position of `case` among the run's cases (−1 when it is not one of them)."""
        if case is None:
            return -1
        at = bisect_left(self._sorted, case)
        return int(self._order[at].as_py()) if at < len(self._sorted) and self._sorted[at] == case else -1

    def of(self, rows: pa.ChunkedArray) -> np.ndarray:
        """Positions of the case ids `rows` (−1 for an id outside the run)."""
        ids = rows.combine_chunks()
        start = self.start(ids[0].as_py()) if len(ids) else -1
        if 0 <= start <= len(self.case_ids) - len(ids):
            same = pc.equal(ids, self.case_ids.slice(start, len(ids)))
            if same.null_count == 0 and to_numpy(same, False, bool).all():
                return start + np.arange(len(ids), dtype=np.int64)
        return index_in(ids, self.case_ids)


class _AsPython:
    """An Arrow string array read as Python strings one item at a time (what `bisect` reads of it)."""

    def __init__(self, array: pa.Array) -> None:
        self.array = array

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, i: int) -> str:
        value: str = self.array[i].as_py()
        return value


def failing_or_of_cases(wanted: np.ndarray, positions: CasePositions) -> Keep:
    """Rows that did not pass, and rows of the cases `wanted` marks (per case position: the control's
    answers to the cases another arm failed)."""

    def keep(part: pa.Table) -> np.ndarray:
        at = positions.of(part["case_id"])
        return failing(part) | ((at >= 0) & wanted[np.maximum(at, 0)])

    return keep


@dataclass(frozen=True)
class PartTexts:
    """The rows of one part (or of consecutive parts, concatenated) without their texts, and the texts kept:
    their rows in that table, ascending."""

    rows: pa.Table
    kept: np.ndarray
    texts: pa.Table


def split(part: pa.Table, keep: Keep) -> PartTexts:
    """`part` (read with TEXT_COLUMNS) without them, and the texts of the rows `keep` selects."""
    offsets = np.flatnonzero(keep(part))
    texts = part.select(list(TEXT_COLUMNS)).take(int64_array(offsets))
    return PartTexts(part.drop_columns(list(TEXT_COLUMNS)), offsets, texts)


@dataclass(frozen=True)
class KeptTexts:
    """The texts kept over the whole run: `rows` (ascending row indices over all parts, as RunRows numbers
    them) and their TEXT_COLUMNS, in that order."""

    rows: np.ndarray
    texts: pa.Table

    @staticmethod
    def of(parts: list[PartTexts], starts: np.ndarray) -> KeptTexts:
        """The parts' kept texts, each part's rows offset by its first row's index (`starts`)."""
        if not parts:
            empty = pa.table({c: pa.nulls(0, pa.string()) for c in TEXT_COLUMNS})
            return KeptTexts(np.zeros(0, dtype=np.int64), empty)
        rows = np.concatenate([p.kept + start for p, start in zip(parts, starts.tolist(), strict=True)])
        return KeptTexts(rows, pa.concat_tables([p.texts for p in parts]).combine_chunks())

    def find(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(whether each of `rows` is kept, its index into `texts` where it is)."""
        at = np.searchsorted(self.rows, rows)
        inside = at < self.rows.size
        found = np.zeros(rows.shape, dtype=bool)
        found[inside] = self.rows[at[inside]] == rows[inside]
        return found & (rows >= 0), at


def read_texts(
    paths: list[Path], part: np.ndarray, offset: np.ndarray, columns: list[str]
) -> dict[str, list[Any]]:
    """`columns` (of TEXT_COLUMNS) of the rows at (`part`, `offset`), read from those parts alone."""
    out: dict[str, list[Any]] = {c: [None] * len(part) for c in columns}
    for i in np.unique(part).tolist():
        table = read_part(paths[i], columns)
        mine = np.flatnonzero(part == i)
        rows = table.take(int64_array(offset[mine]))
        for column in columns:
            for j, value in zip(mine.tolist(), rows[column].to_pylist(), strict=True):
                out[column][j] = value
    return out
