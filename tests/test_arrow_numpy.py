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


def test_one_value_shares_an_array_of_one_bit_pattern_only() -> None:
    """One value throughout (all equal bits) is a read-only stride-0 view of the same values; -0.0 beside
    0.0, NaNs of two payloads, two values, or fewer than two elements are kept as they are."""
    from kvgate.arrow_numpy import one_value

    for values in (
        np.full(1000, 7, dtype=np.int64),
        np.full(1000, np.nan),
        np.full(1000, -0.0),
        np.ones(1000, dtype=bool),
        np.zeros(1000, dtype=np.int32),
    ):
        shared = one_value(values)
        assert shared.strides == (0,) and not shared.flags.writeable
        assert shared.dtype == values.dtype and shared.shape == values.shape
        assert shared.tobytes() == values.tobytes()  # the same bits, -0.0 and NaN included
    other_nan = np.full(4, np.nan)
    other_nan.view(np.uint64)[2] ^= 1  # another NaN payload
    for values in (
        np.array([0.0, -0.0, 0.0]),
        other_nan,
        np.array([3, 3, 3, 4], dtype=np.int64),
        np.array([True, False]),
        np.array([5], dtype=np.int64),
        np.zeros(0),
    ):
        assert one_value(values) is values


def test_numpy_columns_of_one_value_are_the_plain_conversion_in_no_memory() -> None:
    """A column of one value, or all null, converts to the plain conversion's values, read-only, without
    an array of its own; a column of several values is a contiguous array."""
    from kvgate.arrow_numpy import NumpyColumns

    n = 5000
    table = pa.table(
        {
            "zero": pa.chunked_array([pa.array([0] * 1000, pa.int32())] * 5),
            "none": pa.chunked_array([pa.nulls(2500, pa.float64())] * 2),
            "some": pa.array([None, *range(n - 1)], pa.int32()),
            "kind": pa.array(["x"] * n).dictionary_encode(),
        }
    )
    columns = NumpyColumns(table)
    for name, fill, dtype in (("zero", -1, np.int64), ("none", np.nan, np.float64), ("some", -1, np.int64)):
        got, want = columns.get(name, fill, dtype), plain(table[name], fill, dtype)
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
        assert not got.flags.writeable
        assert (got.strides == (0,)) == (name != "some")
    assert columns.get("none", 0.0, np.float64).tolist() == [0.0] * n  # each fill its own
    codes, values = columns.codes("kind")
    assert codes.strides == (0,) and values == ["x"] and codes.tolist() == [0] * n
