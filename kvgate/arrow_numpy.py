"""Arrow ↔ numpy for fixed-width columns, straight from the buffers.

pyarrow's own conversions (`Array.to_numpy`, `pa.array(ndarray)`, `pa.scalar`) import pandas on first
use to check for pandas objects, which costs more CPU than building a million-row report; these helpers
read and write the buffers directly, so the report (and the isolation check it runs) never imports
pandas.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

_NUMPY = {
    pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
    pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
    pa.float32(): np.float32, pa.float64(): np.float64,
}  # fmt: skip


def _bits(buffer: pa.Buffer, offset: int, length: int) -> np.ndarray:
    packed = np.frombuffer(buffer, dtype=np.uint8)
    return np.unpackbits(packed, bitorder="little")[offset : offset + length].astype(bool)


def to_numpy(column: pa.Array | pa.ChunkedArray, fill: Any, dtype: Any) -> np.ndarray:
    """A boolean or fixed-width numeric column as a numpy array of `dtype`, nulls replaced by `fill`."""
    if not (pa.types.is_boolean(column.type) or column.type in _NUMPY):
        raise TypeError(f"no direct numpy view of Arrow type {column.type}")
    if len(column) == 0 or column.null_count == len(column):
        return np.full(len(column), fill, dtype=dtype)  # nothing to read (all null: a column stored later)
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    n, offset = len(array), array.offset
    validity, data = array.buffers()[:2]
    if pa.types.is_boolean(array.type):
        values = _bits(data, offset, n)
    else:
        values = np.frombuffer(data, dtype=_NUMPY[array.type])[offset : offset + n]
    if array.null_count == 0 or validity is None:
        return values.astype(dtype, copy=True)
    return np.where(_bits(validity, offset, n), values, fill).astype(dtype)


def int64_array(values: np.ndarray) -> pa.Array:
    """A numpy integer array as an Arrow int64 array (no nulls)."""
    data = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def dictionary_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """(per-row index into the values, −1 for null; the values) of a dictionary or string column, all
    chunks at once."""
    if len(column) == 0:
        return np.zeros(0, dtype=np.int64), []
    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    unified = pa.table({"c": column}).unify_dictionaries()["c"]
    values = [str(v) for v in unified.chunk(0).dictionary.to_pylist()]
    indices = pa.chunked_array([chunk.indices for chunk in unified.chunks], type=unified.type.index_type)
    return to_numpy(indices, -1, np.int64), values


def repeated(value: np.ndarray, n: int) -> np.ndarray:
    """`n` copies of the one-element (or 0-d) `value`, read-only, sharing its one element (stride 0)."""
    return np.broadcast_to(value.reshape(()), (n,))


def one_value(values: np.ndarray) -> np.ndarray:
    """`values`, or, where every element has the same bits as the first (−0.0 and 0.0, NaNs of other
    payloads told apart), `repeated` of it: the same values, read-only, in no memory of their own. A
    report's columns are often one value throughout (attempt 0, no cached tokens, no certificate), and
    on a machine where each fresh page costs a fault (bench/bench_report.py) 8 MB per million rows
    freed for the next column's use is worth the one comparison."""
    if values.ndim != 1 or values.size < 2:
        return values
    bits = values.view(f"u{values.itemsize}") if values.dtype.kind in "fb" else values
    if bits[0] != bits[-1] or not (bits == bits[0]).all():
        return values
    return repeated(values[:1].copy(), values.size)


class NumpyColumns:
    """A table's boolean and fixed-width columns as numpy arrays, each converted once and shared
    read-only: `get` returns the same array for the same column, fill and dtype, and for another fill
    where the column holds no null (the fill never shows); `codes` memoises `dictionary_codes`."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self._arrays: dict[tuple[str, str], dict[str, np.ndarray]] = {}
        self._codes: dict[str, tuple[np.ndarray, list[str]]] = {}

    def get(self, name: str, fill: Any, dtype: Any) -> np.ndarray:
        """`to_numpy(table[name], fill, dtype)`, read-only; a column of one value throughout (all null
        among them) as `one_value` gives it, in no memory of its own."""
        done = self._arrays.setdefault((name, np.dtype(dtype).str), {})
        key = repr(fill)
        if key not in done:
            column = self.table[name]
            if done and column.null_count == 0:
                done[key] = next(iter(done.values()))
            elif len(column) and column.null_count == len(column):
                done[key] = repeated(np.array(fill, dtype=dtype), len(column))
            else:
                done[key] = one_value(to_numpy(column, fill, dtype))
                done[key].flags.writeable = False
        return done[key]

    def codes(self, name: str) -> tuple[np.ndarray, list[str]]:
        """`dictionary_codes(table[name])`, the codes read-only (`one_value`)."""
        if name not in self._codes:
            codes, values = dictionary_codes(self.table[name])
            codes = one_value(codes)
            codes.flags.writeable = False
            self._codes[name] = codes, values
        codes, values = self._codes[name]
        return codes, list(values)
