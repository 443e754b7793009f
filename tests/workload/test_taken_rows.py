"""workload.taken_rows.take_rows: some rows of a Parquet file's columns, in the order asked (repeats
too), the same as taking them from the whole columns, read batch by batch and stopping after the last."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kvgate.workload.taken_rows import take_rows

N = 1000


def parquet(tmp_path: Path) -> pq.ParquetFile:
    table = pa.table({"id": [f"c{i}" for i in range(N)], "n": np.arange(N), "text": [None, "x"] * (N // 2)})
    pq.write_table(table, tmp_path / "w.parquet", row_group_size=300)
    return pq.ParquetFile(tmp_path / "w.parquet")


@pytest.mark.parametrize("rows", [[5, 3, 999, 0, 3, 301, 300], [0], list(range(N))[::-1], []])
def test_rows_are_the_whole_columns_taken(tmp_path: Path, rows: list[int]) -> None:
    file = parquet(tmp_path)
    whole = file.read(columns=["text", "id"])
    for batch in (7, 64, 4096):
        got = take_rows(file, ["text", "id"], np.array(rows, dtype=np.int64), batch_rows=batch)
        assert got.column_names == ["text", "id"]
        assert got.equals(whole.take(pa.array(rows, pa.int64())))


def test_the_read_stops_after_the_last_row_wanted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = parquet(tmp_path)
    read: list[int] = []
    batches = file.iter_batches

    def counted(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        for batch in batches(*args, **kwargs):  # type: ignore[arg-type]
            read.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(file, "iter_batches", counted)
    assert take_rows(file, ["n"], np.array([10, 130]), batch_rows=100)["n"].to_pylist() == [10, 130]
    assert sum(read) == 200


def test_a_row_past_the_end_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IndexError, match="rows up to 1000"):
        take_rows(parquet(tmp_path), ["n"], np.array([3, N]))
