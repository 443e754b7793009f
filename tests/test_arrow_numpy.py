"""kvgate.arrow_numpy.to_numpy against the plain conversion (`to_pylist`, nulls filled), for every shape a
report's columns come in: sliced arrays, chunked columns with empty chunks, no nulls, some, all."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kvgate.arrow_numpy import to_numpy

VALUES = {
    pa.int32(): [1, None, 3, 4, None, 6],
    pa.float64(): [1.5, None, -2.0, 0.0, 1e-9, None],
    pa.bool_(): [True, None, False, True, True, False, False, True, True, None],
}
TARGETS = [(-1, np.int64), (np.nan, np.float64), (False, bool)]


def shapes(typ: pa.DataType) -> list[pa.Array | pa.ChunkedArray]:
    values = VALUES[typ]
    out: list[pa.Array | pa.ChunkedArray] = []
    for base in (
        pa.array(values, typ),
        pa.array([v for v in values if v is not None], typ),
        pa.nulls(5, typ),
    ):
        out += [
            base,
            base.slice(1),
            pa.chunked_array([base]),
            pa.chunked_array([base.slice(0, 2), base.slice(2)]),
            pa.chunked_array([base.slice(1, 0), base.slice(1), base.slice(0, 1)], typ),
            pa.chunked_array([], typ),
        ]
    return out


def plain(column: pa.Array | pa.ChunkedArray, fill: Any, dtype: Any) -> np.ndarray:
    return np.array([fill if v is None else v for v in column.to_pylist()], dtype=dtype)


@pytest.mark.parametrize("typ", list(VALUES), ids=str)
def test_to_numpy_is_the_plain_conversion(typ: pa.DataType) -> None:
    for column in shapes(typ):
        for fill, dtype in TARGETS:
            if pa.types.is_floating(typ) and dtype is not np.float64:
                continue
            got, want = to_numpy(column, fill, dtype), plain(column, fill, dtype)
            assert got.dtype == want.dtype
            assert np.array_equal(got, want, equal_nan=dtype is np.float64), (column, got, want)


def test_a_column_without_a_numpy_view_is_refused() -> None:
    with pytest.raises(TypeError, match="no direct numpy view"):
        to_numpy(pa.chunked_array([pa.nulls(3, pa.string())]), None, object)


def test_numpy_columns_convert_each_column_once() -> None:
    """The same array for the same request and, where a column holds no null, for another fill; a column
    with nulls is converted per fill; every array read-only."""
    from kvgate.arrow_numpy import NumpyColumns

    table = pa.table(
        {
            "full": pa.array([1, 2, 3], pa.int32()),
            "gaps": pa.array([1, None, 3], pa.int32()),
            "arm": pa.array(["b", "a", "b"]),
        }
    )
    columns = NumpyColumns(table)
    full = columns.get("full", 0, np.int64)
    assert columns.get("full", 0, np.int64) is full and columns.get("full", -1, np.int64) is full
    assert columns.get("full", -1, np.float64) is not full  # another dtype is another array
    assert list(columns.get("gaps", 0, np.int64)) == [1, 0, 3]
    assert list(columns.get("gaps", -1, np.int64)) == [1, -1, 3]
    with pytest.raises(ValueError, match="read-only"):
        full[0] = 9
    codes, values = columns.codes("arm")
    assert list(codes) == [0, 1, 0] and values == ["b", "a"]
    assert columns.codes("arm")[0] is codes
