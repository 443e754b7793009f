"""The failing examples' workload columns are taken at the rows the run selected (CaseTable.workload_rows)
when the file's case ids there are the cases'; a workload whose rows moved is joined by case id, and a
case the file lacks reads None."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

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


def test_the_workload_is_read_again_only_for_cases_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixed_run: Path
) -> None:
    """The examples' columns are read once for the cases of the rows whose texts the read kept (every
    failing one) and again only for a case outside them, the values the same either way."""
    import kvgate.report.analysis.evidence as evidence
    from kvgate.report.analysis.run_data import RunRows, read_cases
    from kvgate.rundir.manifest import read_manifest

    manifest = read_manifest(fixed_run)
    run_cases = read_cases(manifest)
    rows = RunRows(fixed_run, run_cases, list(manifest["arms"]), texts_for=manifest["matrix"]["control"])
    reads: list[int] = []

    def counted(parquet: Any, columns: Any, at: np.ndarray) -> Any:
        reads.append(len(at))
        return take_rows(parquet, columns, at)

    take_rows = evidence.take_rows
    monkeypatch.setattr(evidence, "take_rows", counted)
    shown = Evidence(fixed_run, run_cases, manifest["workload_path"], rows)
    failing = np.unique(rows.case[rows.kept.rows])
    assert 0 < failing.size < run_cases.n
    first = shown.workload_columns(["expected", "messages"], failing[::-1])
    assert reads == [failing.size]
    assert shown.workload_column("expected", failing[:3]) == first["expected"][::-1][:3]
    assert reads == [failing.size]  # covered: not read again
    other = int(np.setdiff1d(np.arange(run_cases.n), failing)[0])
    plain = Evidence(fixed_run, run_cases, manifest["workload_path"], cast(Any, None))
    assert shown.workload_column("expected", np.array([other])) == plain.workload_column(
        "expected", np.array([other])
    )
    assert reads[1] == failing.size + 1
    assert first == plain.workload_columns(["expected", "messages"], failing[::-1])
