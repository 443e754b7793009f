"""analysis.run_data.positions: each stored row's case position, its part placed by its first case and
checked there, or joined by id; the same positions as a lookup of every id, and a row of a case outside
the run refused."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from kvgate.errors import BadInput
from kvgate.report.analysis.run_data import CaseTable, positions

RANDOM = random.Random(5)
IDS = [f"case-{i:04d}" for i in range(300)]
RANDOM.shuffle(IDS)


def cases() -> CaseTable:
    n = len(IDS)
    return CaseTable(
        case_ids=pa.array(IDS),
        critical=np.zeros(n, dtype=bool),
        n_prompt_tokens=np.full(n, -1, dtype=np.int64),
        slice_columns=(),
        labels={},
        clusters=np.arange(n, dtype=np.int64),
        workload_rows=np.arange(n, dtype=np.int64),
    )


def test_rows_get_the_positions_a_lookup_of_every_id_gives() -> None:
    shuffled = IDS[50:90]
    RANDOM.shuffle(shuffled)
    parts = [
        IDS[0:64],  # consecutive from the first case
        [],  # an empty part
        IDS[236:300],  # consecutive to the last
        IDS[100:110] + IDS[5:9],  # starts like a consecutive part, then jumps
        shuffled,
        [IDS[299], IDS[0]],  # runs past the last case
        IDS[120:121],  # one row
        IDS[3:6] + IDS[3:6],  # a case twice
    ]
    column = pa.chunked_array([pa.array(p, pa.string()) for p in parts], pa.string())
    where = {case: i for i, case in enumerate(IDS)}
    got = positions(column, cases(), Path("run"))
    assert got.dtype == np.int64
    assert got.tolist() == [where[c] for p in parts for c in p]
    assert positions(pa.chunked_array([], pa.string()), cases(), Path("run")).size == 0


@pytest.mark.parametrize("part", [["stray", *IDS[3:6]], [*IDS[3:6], "stray"], [*IDS[3:6], None]])
def test_a_row_of_a_case_outside_the_run_is_refused(part: list[str | None]) -> None:
    column = pa.chunked_array([pa.array(IDS[0:10]), pa.array(part, pa.string())])
    with pytest.raises(BadInput, match="not in the run's workload"):
        positions(column, cases(), Path("run"))
