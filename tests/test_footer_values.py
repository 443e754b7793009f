"""rundir.footer_values: a part read with a check builds the columns its footer states (all null, or one
exact value in every row group) from the statistics, and they equal the decoded columns exactly, types
and dictionaries included; columns the statistics do not state (mixed values, floating point, long
strings, a part written without statistics) are decoded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kvgate.rundir import footer_values
from kvgate.rundir.footer_values import SHORT_STRING, stated_columns
from kvgate.rundir.result_part import RESULT_SCHEMA, RESULT_SCHEMA_VERSION, RESULT_VERSION_KEY, read_part

ROWS = 300
LONG = "x" * (SHORT_STRING + 1)


def rows(n: int, arm: str, replicate: int, kv_dtype: str) -> pa.Table:
    """`n` result rows: most columns one value, some mixed, the certificate's null."""
    rng = np.random.default_rng(n)
    columns: dict[str, pa.Array] = {f.name: pa.nulls(n, f.type) for f in RESULT_SCHEMA}
    columns |= {
        "case_id": pa.array([f"c{i}" for i in range(n)]),
        "arm": pa.array([arm] * n),
        "replicate": pa.array(np.full(n, replicate, np.int32)),
        "attempt": pa.array(np.zeros(n, np.int32)),
        "passed": pa.array(np.ones(n, bool)),
        "n_prompt_tokens": pa.array(rng.integers(1, 9, n).astype(np.int32)),
        "mean_logprob": pa.array(np.full(n, -0.5)),  # one value, but floating point: decoded
        "ttft_s": pa.array(rng.random(n)),
        "kv_bytes": pa.array(np.full(n, 1 << 40, np.int64)),
        "kv_dtype": pa.array([kv_dtype] * n),
    }
    return pa.table(columns, schema=RESULT_SCHEMA)


def write(path: Path, table: pa.Table, **options: object) -> Path:
    table = table.replace_schema_metadata({RESULT_VERSION_KEY: str(RESULT_SCHEMA_VERSION).encode()})
    pq.write_table(table, path, write_page_checksum=True, row_group_size=ROWS // 3, **options)
    return path


def accept(*_: object) -> None:
    """A check that accepts the part (the run's PartCheck verifies its sha256 here)."""


def read_both(path: Path) -> tuple[pa.Table, pa.Table]:
    """The part read with a check (stated columns from the footer) and without (every column decoded)."""
    columns = [c for c in RESULT_SCHEMA.names if c != "output_token_ids"]
    stated = read_part(path, columns, dictionary=["arm", "fail_kind"], check=accept)
    decoded = read_part(path, columns, dictionary=["arm", "fail_kind"])
    return stated, decoded


def stated_names(path: Path) -> set[str]:
    with pq.ParquetFile(path, read_dictionary=["arm"]) as part:
        return set(stated_columns(part.metadata, part.schema_arrow, RESULT_SCHEMA.names))


def test_stated_columns_equal_the_decoded_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(footer_values, "_layouts", [])
    path = write(tmp_path / "part.parquet", rows(ROWS, "fp8-e4m3", 1, "fp8"))
    for _ in range(2):  # the second read with the layout and its arrays remembered
        stated, decoded = read_both(path)
        assert stated.equals(decoded, check_metadata=True)
        assert stated.schema == decoded.schema
    names = stated_names(path)
    assert {"arm", "replicate", "attempt", "passed", "kv_bytes", "kv_dtype", "detail"} <= names
    assert {"certificate_bound_max", "first_divergence", "fail_kind"} <= names  # null throughout
    assert not names & {"case_id", "n_prompt_tokens", "mean_logprob", "ttft_s"}


def test_row_groups_that_differ_are_decoded(tmp_path: Path) -> None:
    table = pa.concat_tables(
        [rows(ROWS // 3, "a", 0, "fp8"), rows(ROWS // 3, "a", 1, "fp8"), rows(ROWS // 3, "a", 0, "q8")]
    )
    path = write(tmp_path / "part.parquet", table)
    stated, decoded = read_both(path)
    assert stated.equals(decoded, check_metadata=True)
    names = stated_names(path)
    assert "arm" in names and not names & {"replicate", "kv_dtype"}


def test_long_strings_and_parts_without_statistics_are_decoded(tmp_path: Path) -> None:
    long = write(tmp_path / "long.parquet", rows(ROWS, LONG, 0, LONG))
    assert not stated_names(long) & {"arm", "kv_dtype"}
    bare = write(tmp_path / "bare.parquet", rows(ROWS, "a", 0, "fp8"), write_statistics=False)
    assert stated_names(bare) == set()
    for path in (long, bare):
        stated, decoded = read_both(path)
        assert stated.equals(decoded, check_metadata=True)


def test_parts_of_one_schema_keep_their_own_metadata(tmp_path: Path) -> None:
    """Parts alike but for their metadata (their binding: another run or arm) are each read with their
    own, however often the same columns' schema is found again."""
    paths = []
    for name in ("one", "two"):
        table = rows(ROWS, "a", 0, "fp8").replace_schema_metadata(
            {RESULT_VERSION_KEY: str(RESULT_SCHEMA_VERSION).encode(), b"kvgate.part": name.encode()}
        )
        pq.write_table(table, tmp_path / f"{name}.parquet", write_page_checksum=True)
        paths.append(tmp_path / f"{name}.parquet")
    for path in [*paths, *paths]:
        stated, decoded = read_both(path)
        assert stated.equals(decoded, check_metadata=True)
        assert stated.schema.metadata[b"kvgate.part"] == path.stem.encode()
