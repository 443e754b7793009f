"""kvgate.arrow_build against pyarrow's own `Table.from_pylist`: the same Parquet bytes for every type
kvgate stores (nulls, empty strings and lists, non-ASCII text, infinities and NaN, int64 beyond int32),
the same refusals of a value of the wrong kind (and of a fraction pyarrow would truncate), and no pandas
imported along the way (the reason it exists)."""

from __future__ import annotations

import io
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kvgate.arrow_build import array, table
from kvgate.rundir.result_part import RESULT_SCHEMA

ROWS: list[dict[str, Any]] = [
    {"case_id": "c1", "arm": "full", "replicate": 0, "attempt": 0, "output_text": "héllo\u2028 ✓ 𝄞",
     "output_token_ids": [1, 2, 3], "passed": True, "ttft_s": 0.1, "latency_s": float("inf"),
     "mean_logprob": float("-inf"), "min_logprob": float("nan"), "kv_bytes": 2**40, "n_cached_tokens": 7},
    {"case_id": "c2", "arm": "full", "replicate": 1, "attempt": 0, "output_text": "", "output_token_ids": [],
     "passed": False, "fail_kind": "mismatch", "n_prompt_tokens": 5, "ttft_s": 3},
    {"case_id": "c3", "arm": "x", "replicate": 1, "attempt": 2, "output_text": None, "output_token_ids": None,
     "passed": None, "first_divergence": -1, "detail": "a\nb"},
]  # fmt: skip


def parquet_bytes(t: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(t, out, write_page_checksum=True)
    return out.getvalue()


@pytest.mark.parametrize("rows", [ROWS, ROWS[1:2], ROWS[2:], []], ids=["mixed", "one", "nulls", "empty"])
def test_the_same_parquet_as_from_pylist(rows: list[dict[str, Any]]) -> None:
    built = table(rows, RESULT_SCHEMA)
    built.validate(full=True)
    assert built.schema.equals(RESULT_SCHEMA)
    assert parquet_bytes(built) == parquet_bytes(pa.Table.from_pylist(rows, schema=RESULT_SCHEMA))


@pytest.mark.parametrize(
    ("type_", "value", "error"),
    [
        (pa.int32(), True, TypeError),
        (pa.int32(), "1", TypeError),
        (pa.int32(), 2**31, OverflowError),
        (pa.int64(), 2**63, OverflowError),
        (pa.float64(), "1.0", TypeError),
        (pa.string(), 1, TypeError),
        (pa.bool_(), 1, TypeError),
        (pa.list_(pa.int32()), "ab", TypeError),
    ],
)
def test_a_value_pyarrow_refuses_is_refused(type_: pa.DataType, value: Any, error: type) -> None:
    with pytest.raises((pa.ArrowException, TypeError, OverflowError)):
        pa.array([value], type_)
    with pytest.raises(error):
        array([value], type_, "col")


def test_a_fraction_in_an_integer_column_is_refused_not_truncated() -> None:
    assert pa.array([1.5], pa.int32()).to_pylist() == [1]  # pyarrow truncates
    with pytest.raises(TypeError, match="col: expected an integer"):
        array([1.5], pa.int32(), "col")
    assert array([2.0, None], pa.int32()).to_pylist() == [2, None]
    assert pa.array([[1.5]], pa.list_(pa.int32())).to_pylist() == [[1]]
    with pytest.raises(TypeError):
        array([[1.5]], pa.list_(pa.int32()), "col")


def test_no_pandas_is_imported() -> None:
    code = (
        "import io, sys, pyarrow.parquet as pq\n"
        "from kvgate.arrow_build import table\n"
        "from kvgate.rundir.result_part import RESULT_SCHEMA\n"
        "rows = [{'case_id': 'c', 'arm': 'a', 'replicate': 0, 'attempt': 0, 'output_token_ids': [1],\n"
        "         'passed': True, 'ttft_s': 0.5, 'output_text': 'x'}]\n"
        "pq.write_table(table(rows, RESULT_SCHEMA), io.BytesIO())\n"
        "print('pandas' in sys.modules)\n"
    )
    argv = [sys.executable, "-c", code]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"


def test_a_scalar_is_the_typed_value() -> None:
    from kvgate.arrow_build import scalar

    assert scalar(0, pa.int32()).equals(pa.scalar(0, pa.int32()))
    assert scalar("full", pa.string()).as_py() == "full"
