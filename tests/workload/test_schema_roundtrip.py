"""Workload Parquet: round trip, byte-identical re-freeze, tamper detection, schema versions."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kvgate.errors import BadInput
from kvgate.workload.freeze import freeze
from kvgate.workload.schema import META_KEY, SCHEMA_VERSION, read_workload, write_workload
from kvgate.workload.tokenizer import WordTokenizer


def test_round_trip_keeps_every_field(smoke_workload: Path) -> None:
    workload = read_workload(smoke_workload)
    assert len(workload.cases) == 24
    assert workload.meta["schema_version"] == SCHEMA_VERSION
    case = workload.cases[0]
    assert case.task == "passkey"
    assert case.validator == "substring_all"
    assert case.expected[0] in case.messages[-1]["content"]
    assert case.n_prompt_tokens == len(case.prompt_token_ids or ())
    assert set(case.slices) == {"ctx_bucket", "depth_bucket"}
    assert workload.slice_columns == ("task", "ctx_bucket", "depth_bucket")


def test_same_suite_and_seed_is_byte_identical(tmp_path: Path) -> None:
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    freeze(["smoke"], a, WordTokenizer(), seed=3)
    freeze(["smoke"], b, WordTokenizer(), seed=3)
    assert a.read_bytes() == b.read_bytes()
    freeze(["smoke"], b, WordTokenizer(), seed=4)
    assert a.read_bytes() != b.read_bytes()


def test_case_ids_are_unique_and_stable(smoke_workload: Path, tmp_path: Path) -> None:
    ids = [c.case_id for c in read_workload(smoke_workload).cases]
    assert len(set(ids)) == len(ids)
    again = tmp_path / "again.parquet"
    freeze(["smoke"], again, WordTokenizer(), seed=0)
    assert [c.case_id for c in read_workload(again).cases] == ids


def _rewrite(src: Path, dst: Path, edit_rows: object = None, edit_meta: object = None) -> None:
    table = pq.read_table(src)
    meta = json.loads(table.schema.metadata[META_KEY])
    if callable(edit_meta):
        edit_meta(meta)
    rows = table.to_pylist()
    if callable(edit_rows):
        edit_rows(rows)
    import pyarrow as pa

    out = pa.Table.from_pylist(rows, schema=table.schema).replace_schema_metadata(
        {META_KEY: json.dumps(meta).encode()}
    )
    pq.write_table(out, dst)


def test_tampered_rows_are_refused(smoke_workload: Path, tmp_path: Path) -> None:
    bad = tmp_path / "tampered.parquet"
    _rewrite(smoke_workload, bad, edit_rows=lambda rows: rows[0].update(expected='["00000"]'))
    with pytest.raises(BadInput, match="do not match its content sha256"):
        read_workload(bad)


def test_future_schema_version_is_refused(smoke_workload: Path, tmp_path: Path) -> None:
    future = tmp_path / "future.parquet"
    _rewrite(smoke_workload, future, edit_meta=lambda m: m.update(schema_version=SCHEMA_VERSION + 1))
    with pytest.raises(BadInput, match="upgrade kvgate"):
        read_workload(future)


def test_malformed_and_missing_files_are_one_line_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet at all")
    with pytest.raises(BadInput, match="not readable Parquet"):
        read_workload(junk)
    with pytest.raises(BadInput, match="does not exist"):
        read_workload(tmp_path / "missing.parquet")


def test_read_token_ids_equal_the_frozen_ones_and_share_int_objects(tmp_path: Path) -> None:
    base = tmp_path / "base.parquet"
    freeze(["smoke"], base, WordTokenizer(), seed=0)
    first, second, third = read_workload(base).cases[:3]
    small = (7, 300, 70_000, 300)
    large = (2**31 - 1, 5, 2**31 - 1)  # beyond any vocabulary (WordTokenizer's crc32 ids): kept as read
    for name, ids in (("small", small), ("large", large)):
        cases = [
            replace(
                first, case_id=f"{name}0", prompt_token_ids=ids, n_prompt_tokens=len(ids), question_start=None
            ),
            replace(second, case_id=f"{name}1", prompt_token_ids=None, n_prompt_tokens=None),
            replace(third, case_id=f"{name}2", prompt_token_ids=(), n_prompt_tokens=0, question_start=None),
        ]
        write_workload(cases, tmp_path / f"{name}.parquet", {})
        read = read_workload(tmp_path / f"{name}.parquet").cases
        assert [c.prompt_token_ids for c in read] == [ids, None, ()]
    shared = read_workload(tmp_path / "small.parquet").cases[0].prompt_token_ids
    assert shared is not None and shared[1] is shared[3]  # one int object per distinct id
