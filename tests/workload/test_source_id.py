"""A trace record's own id (`"id": "req-17"`) is kept in the workload's optional source_id column, so a
failure can be traced back to its request; workloads without ids keep the columns and the content hash
they had."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from kvgate.workload.case import SOURCE_ID
from kvgate.workload.freeze import freeze
from kvgate.workload.schema import read_workload, stream_content_sha256
from kvgate.workload.tokenizer import WordTokenizer


def test_trace_ids_are_stored_read_and_hashed(tmp_path: Path) -> None:
    records = [{"messages": [{"role": "user", "content": f"q{i}"}], "expected": str(i)} for i in range(3)]
    records[0]["id"], records[2]["id"] = "req-0", 17  # a number is kept as text; record 1 has none
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "s.toml").write_text('name = "s"\n[[trace]]\npath = "t.jsonl"\nvalidator = "exact"\n')
    path = tmp_path / "w.parquet"
    sha = freeze([str(tmp_path / "s.toml")], path, WordTokenizer(), seed=0)
    workload = read_workload(path)
    assert [c.source_id for c in workload.cases] == ["req-0", None, "17"]
    assert pq.read_schema(path).field(SOURCE_ID).type == "string"
    assert workload.sha256 == sha == stream_content_sha256(path)[0]


def test_a_workload_without_ids_has_no_source_id_column(smoke_workload: Path, tmp_path: Path) -> None:
    assert SOURCE_ID not in pq.read_schema(smoke_workload).names
    assert all(c.source_id is None for c in read_workload(smoke_workload).cases)
    again = tmp_path / "smoke.parquet"
    assert freeze(["smoke"], again, WordTokenizer(), seed=0) == read_workload(smoke_workload).sha256
