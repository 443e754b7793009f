"""Arrow columns from Python values, built straight from buffers, without importing pandas.

pyarrow's `pa.array` and `Table.from_pylist` ask pandas, on their first call in a process, whether the
values are pandas objects (`_is_array_like` in pyarrow 26's array.pxi imports pandas when it is installed):
≈0.4 CPU-s, more on a busy machine, in every `kvgate run` (its result parts) and `kvgate freeze` (its
workload), neither of which holds a pandas object. These helpers write the same arrays for the types
kvgate stores: string, bool, int32, int64, float64 and list<int32>, None for null. A value of the wrong
kind is a TypeError naming it (an integer column takes integers and integral floats, never bools; a
float column takes real numbers; a string column str), and an integer out of its type's range an
OverflowError, as pyarrow refuses them; a fraction in an integer column is refused too, where pyarrow
would truncate it.
"""

from __future__ import annotations

import numbers
from array import array as int_buffer
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import Any

import numpy as np
import pyarrow as pa

_INTEGERS = {pa.int32(): np.int32, pa.int64(): np.int64}
_STRING_BYTES_MAX = 2**31 - 1
"""A string array's offsets are int32: its values' UTF-8 bytes in all."""


def table(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """`rows` as a table of `schema` (a key missing from a row is null), as `Table.from_pylist` makes."""
    columns = [array([row.get(field.name) for row in rows], field.type, field.name) for field in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def scalar(value: Any, type: pa.DataType) -> pa.Scalar:
    """`value` as an Arrow scalar of `type`, for a compute function's operand (pyarrow.compute turns a
    Python value into one through `pa.scalar`, which imports pandas as `pa.array` does)."""
    return array([value], type)[0]


def array(values: Sequence[Any], type: pa.DataType, name: str = "a column") -> pa.Array:
    """`values` as an Arrow array of `type` (one of the types above); `name` is the column's, for errors."""
    n = len(values)
    valid = [v is not None for v in values]
    bitmap = np.packbits(np.array(valid, dtype=bool), bitorder="little")
    validity = None if all(valid) else pa.py_buffer(bitmap)
    present = [v for v in values if v is not None]
    if type in _INTEGERS:
        data = np.zeros(n, dtype=_INTEGERS[type])
        data[np.flatnonzero(valid)] = np.array([_integer(v, name) for v in present], dtype=_INTEGERS[type])
        return pa.Array.from_buffers(type, n, [validity, pa.py_buffer(data)])
    if type == pa.float64():
        data = np.zeros(n, dtype=np.float64)
        data[np.flatnonzero(valid)] = [_real(v, name) for v in present]
        return pa.Array.from_buffers(type, n, [validity, pa.py_buffer(data)])
    if type == pa.bool_():
        bits = np.zeros(n, dtype=bool)
        bits[np.flatnonzero(valid)] = [_boolean(v, name) for v in present]
        return pa.Array.from_buffers(type, n, [validity, pa.py_buffer(np.packbits(bits, bitorder="little"))])
    if type == pa.string():
        encoded = [_text(v, name).encode("utf-8") if v is not None else b"" for v in values]
        offsets = list(accumulate(map(len, encoded), initial=0))
        if offsets[-1] > _STRING_BYTES_MAX:
            raise OverflowError(f"{name}: {offsets[-1]} bytes of text, more than an Arrow string array holds")
        buffers = [validity, pa.py_buffer(int_buffer("i", offsets)), pa.py_buffer(b"".join(encoded))]
        return pa.Array.from_buffers(type, n, buffers)
    if type == pa.list_(pa.int32()):
        flat = int_buffer("i")
        for ids in present:
            if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
                raise TypeError(f"{name}: expected a sequence of integers, got {ids!r:.60}")
            flat.extend(ids)
        lengths = [len(v) if v is not None else 0 for v in values]
        offsets = pa.py_buffer(int_buffer("i", accumulate(lengths, initial=0)))
        items = pa.Array.from_buffers(pa.int32(), len(flat), [None, pa.py_buffer(flat)])
        return pa.ListArray.from_buffers(type, n, [validity, offsets], children=[items])
    raise TypeError(f"{name}: no builder for Arrow type {type}")


def _integer(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected an integer, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise TypeError(f"{name}: expected an integer, got {value!r:.60}")


def _real(value: Any, name: str) -> float:
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"{name}: expected a number, got {value!r:.60}")


def _boolean(value: Any, name: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name}: expected true or false, got {value!r:.60}")


def _text(value: Any, name: str) -> str:
    if isinstance(value, str):
        return value
    raise TypeError(f"{name}: expected text, got {value!r:.60}")
