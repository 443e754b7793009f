"""analysis.row_texts.CasePositions: each row's case position, found by its first case (binary search
over the sorted ids) and checked, or joined by hash; the same positions as a lookup of every id; and
row_texts.index_in, the lookup with the smaller side hashed."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kvgate.arrow_numpy import to_numpy
from kvgate.report.analysis.row_texts import CasePositions, index_in

RANDOM = random.Random(11)
IDS = [f"case-{i:04d}" for i in range(500)]
RANDOM.shuffle(IDS)
"""Not in sorted order (a workload's order is not its ids' order)."""


def reference(rows: list[str | None]) -> list[int]:
    where = {case: i for i, case in enumerate(IDS)}
    return [where.get(case, -1) if case is not None else -1 for case in rows]


def test_each_case_is_found_where_it_stands() -> None:
    positions = CasePositions(pa.array(IDS))
    assert [positions.start(case) for case in IDS] == list(range(len(IDS)))
    assert positions.start("not-a-case") == -1
    assert positions.start(None) == -1
    assert positions.start("") == -1
    assert positions.start("~" * 20) == -1  # after every id


def test_rows_get_the_positions_a_full_lookup_gives() -> None:
    positions = CasePositions(pa.array(IDS))
    shuffled = IDS[100:140]
    RANDOM.shuffle(shuffled)
    parts: list[list[str | None]] = [
        IDS[0:64],  # consecutive, from the first case
        IDS[436:500],  # consecutive, to the last
        IDS[200:210] + IDS[5:9],  # starts like a consecutive part, then jumps
        shuffled,
        [IDS[499], IDS[0]],  # runs past the last case
        ["stray", *IDS[3:6]],  # a case outside the run first
        [*IDS[3:6], None],  # a null id
        [],
    ]
    for rows in parts:
        got = positions.of(pa.chunked_array([pa.array(rows, pa.string())]))
        assert got.dtype == np.int64
        assert got.tolist() == reference(rows), rows


def test_index_in_is_pyarrows_with_the_small_side_hashed() -> None:
    """row_texts.index_in: the positions pyarrow's index_in gives, −1 where absent, the first of a value
    the value set holds twice, for values with repeats, nulls and ids outside the set."""
    value_set = pa.array([*IDS, IDS[7], IDS[300]])  # two ids twice: the first position counts
    values = pa.array([IDS[7], None, "elsewhere", IDS[300], IDS[7], IDS[499], IDS[0], "", IDS[300]])
    expected = to_numpy(pc.index_in(values, value_set=value_set), -1, np.int64)
    assert index_in(values, value_set).tolist() == expected.tolist()
    first = [IDS.index(v) if v in IDS else -1 for v in values.to_pylist()]
    assert index_in(values, value_set).tolist() == first
    assert index_in(pa.array([], pa.string()), value_set).tolist() == []
