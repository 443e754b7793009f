"""The failing examples' workload columns are taken at the rows the run selected (CaseTable.workload_rows)
when the file's case ids there are the cases'; a workload whose rows moved is joined by case id, and a
case the file lacks reads None."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kvgate.report.analysis.evidence import Evidence
from kvgate.report.analysis.run_data import case_table


def cases(ids: list[str], rows: list[int]) -> Any:
    n = len(ids)
    table = pa.table(
        {
            "case_id": ids,
            "critical": [False] * n,
            "n_prompt_tokens": pa.array([5] * n, pa.int32()),
            "prefix_group": pa.nulls(n, pa.string()),
        }
    )
    return case_table(table, (), np.array(rows))


def workload(tmp: Path, ids: list[str]) -> str:
    path = tmp / "workload.parquet"
    pq.write_table(pa.table({"case_id": ids, "expected": [f'"{i}"' for i in ids], "messages": ids}), path)
    return str(path)


def expected_at(evidence: Evidence, where: list[int]) -> list[Any]:
    return evidence.workload_column("expected", np.array(where))


def test_selected_rows_moved_rows_and_missing_cases(tmp_path: Path) -> None:
    path = workload(tmp_path, ["a", "b", "c", "d"])
    selected = Evidence(tmp_path, cases(["b", "d"], [1, 3]), path, cast(Any, None))
    assert expected_at(selected, [1, 0]) == ['"d"', '"b"']
    moved = Evidence(tmp_path, cases(["b", "d"], [0, 2]), path, cast(Any, None))  # rows not the cases'
    assert expected_at(moved, [0, 1]) == ['"b"', '"d"']
    missing = Evidence(tmp_path, cases(["b", "z"], [1, 9]), path, cast(Any, None))
    assert expected_at(missing, [0, 1]) == ['"b"', None]
    assert missing.workload_column("source_id", np.array([0])) == [None]  # a column the file lacks
