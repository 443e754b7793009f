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
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    n, offset = len(array), array.offset
    if n == 0:
        return np.zeros(0, dtype=dtype)
    validity, data = array.buffers()[:2]
    if pa.types.is_boolean(array.type):
        values = _bits(data, offset, n)
    elif array.type in _NUMPY:
        values = np.frombuffer(data, dtype=_NUMPY[array.type])[offset : offset + n]
    else:
        raise TypeError(f"no direct numpy view of Arrow type {array.type}")
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
