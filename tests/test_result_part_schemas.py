"""rundir.result_part.stored_version remembers the schemas it matched: the same answers as working each
part's version out afresh, in any order of reading (a part of another version, or of no version's
columns, read after good ones, is still read as its own or refused)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kvgate.errors import BadInput
from kvgate.rundir import result_part
from kvgate.rundir.result_part import RESULT_VERSION_KEY, SCHEMAS, read_part


def part(tmp: Path, name: str, schema: pa.Schema, version: bytes | None) -> Path:
    table = pa.table({f.name: pa.nulls(2, f.type) for f in schema}).replace_schema_metadata(
        {RESULT_VERSION_KEY: version} if version is not None else None
    )
    path = tmp / f"{name}.parquet"
    pq.write_table(table, path, write_page_checksum=True)
    return path


def test_remembered_schemas_give_the_same_versions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(result_part, "_seen_schemas", [])
    current = part(tmp_path, "v4", SCHEMAS[4], b"4")
    old = part(tmp_path, "v1", SCHEMAS[1], None)
    short = part(tmp_path, "v3-declared-4", SCHEMAS[3], b"4")
    extra = part(tmp_path, "extra", pa.schema([*SCHEMAS[4], ("more", pa.int32())]), b"4")
    for _ in range(2):  # the second round reads every part with its schema remembered
        for path in (current, old):
            table = read_part(path, ["case_id", "arm", "kv_bytes"], dictionary=["arm"])
            assert table.column_names == ["case_id", "arm", "kv_bytes"] and table.num_rows == 2
        for path in (short, extra):
            with pytest.raises(BadInput, match="does not have the result schema"):
                read_part(path, ["case_id"], dictionary=["arm"])
    assert len(result_part._seen_schemas) == 2  # the two good ones, each once
