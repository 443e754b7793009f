"""A result part's columns whose every value its footer states, built without decoding their pages.

A Parquet footer keeps each column chunk's statistics: its null count and, for the values present, their
minimum and maximum. A chunk whose nulls are all its values holds only nulls; one without nulls whose
minimum equals its maximum holds that one value throughout. In a result part many columns are such:
its `arm` always (a part holds one arm), usually its replicate, attempt and the proof-of-treatment
counters, and the certificate's scores of an arm without one. Each decoded column chunk costs the same
few dozen microseconds however few its rows, so for the runner's 1024-row parts those columns are a
large share of reading them (bench/bench_report.py).

Only a footer whose bytes are verified may stand in for the pages (rundir.result_part reads these
columns from it only with a `check`: the whole file's sha256 against the run's index). Values are
taken from the statistics only where they are exact (EXACT): integers, booleans, and strings of at
most SHORT_STRING bytes (well under any truncation of string statistics); floating point columns are
always decoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SHORT_STRING = 64
"""Longest string (UTF-8 bytes) taken from the statistics: an arm name fits (rundir.part_index)."""
_INTEGERS = {
    pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
    pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
}  # fmt: skip
_ALL_NULL = object()
"""A chunk's state when it holds only nulls (any other state is its one value, or None: neither)."""


LAYOUTS_MAX = 16
"""Schemas remembered (a run's parts share a few)."""
ARRAYS_MAX = 4096
"""Built arrays remembered per schema, by (leaf, rows, value): parts of the same length and value share
one (Arrow arrays are immutable)."""


@dataclass
class _Layout:
    """For one Arrow schema as read: each asked-for top-level column's leaf in the footer, its physical
    type and its Arrow type; and the arrays built for it so far (immutable, shared by the parts)."""

    schema: pa.Schema
    names: tuple[str, ...]
    leaves: list[tuple[int, str, str, pa.DataType]]
    arrays: dict[tuple[int, int, object], pa.Array] = field(default_factory=dict)


_layouts: list[_Layout] = []
"""The parts of a run share a few schemas: each part after the first is matched by one comparison."""


def _layout(metadata: pq.FileMetaData, schema: pa.Schema, names: Sequence[str]) -> _Layout:
    asked = tuple(names)
    for layout in _layouts:
        if layout.names == asked and layout.schema.equals(schema, check_metadata=False):
            return layout
    parquet = metadata.schema
    leaves = []
    for leaf in range(len(parquet)):
        column = parquet.column(leaf)
        if column.path in asked and schema.get_field_index(column.path) >= 0:  # a top-level column
            leaves.append((leaf, column.path, column.physical_type, schema.field(column.path).type))
    layout = _Layout(schema, asked, leaves)
    if len(_layouts) < LAYOUTS_MAX:
        _layouts.append(layout)
    return layout


def stated_columns(metadata: pq.FileMetaData, schema: pa.Schema, names: Sequence[str]) -> dict[str, pa.Array]:
    """Of the top-level columns `names` (in `schema`, the part's Arrow schema as read), those whose every
    row group's statistics state all their values: all null, or one exact value (integers, booleans,
    short strings) the same in every row group; each as an array of the part's rows of its type in
    `schema` (a dictionary column as a dictionary of that one value)."""
    n = metadata.num_rows
    out: dict[str, pa.Array] = {}
    if metadata.num_row_groups == 0:
        return out
    layout = _layout(metadata, schema, names)
    groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
    for leaf, name, physical, arrow_type in layout.leaves:
        state = _state(groups[0].column(leaf).statistics, groups[0].num_rows, physical)
        for group in groups[1:]:
            if state is None:
                break
            if _state(group.column(leaf).statistics, group.num_rows, physical) != state:
                state = None
        if state is None:
            continue
        key = (leaf, n, state)
        array = layout.arrays.get(key)
        if array is None:
            array = pa.nulls(n, arrow_type) if state is _ALL_NULL else _constant(state, n, arrow_type)
            if array is None:
                continue
            if len(layout.arrays) < ARRAYS_MAX:
                layout.arrays[key] = array
        out[name] = array
    return out


EXACT = frozenset({"BOOLEAN", "INT32", "INT64", "BYTE_ARRAY"})
"""Physical types whose statistics hold exact values (floating point ones leave NaN out, and −0.0 equals
0.0 in them)."""


def _state(stats: pq.Statistics | None, rows: int, physical: str) -> object:
    """_ALL_NULL, the chunk's one value, or None when its statistics do not state every value."""
    if stats is None or not stats.has_null_count:
        return None
    nulls = stats.null_count
    if nulls == rows:
        return _ALL_NULL
    if nulls != 0 or physical not in EXACT or not stats.has_min_max:
        return None
    return stats.min if stats.min_raw == stats.max_raw else None


def _constant(value: object, n: int, field_type: pa.DataType) -> pa.Array | None:
    """`n` copies of `value` as an array of `field_type` (None for a type not built here), from buffers
    (pyarrow's own conversions of Python values import pandas)."""
    if pa.types.is_dictionary(field_type):
        dictionary = _constant(value, 1, field_type.value_type)
        if dictionary is None or field_type.index_type not in _INTEGERS:
            return None
        indices = np.zeros(n, dtype=_INTEGERS[field_type.index_type])
        codes = pa.Array.from_buffers(field_type.index_type, n, [None, pa.py_buffer(indices)])
        return pa.DictionaryArray.from_arrays(codes, dictionary)
    if field_type in _INTEGERS and isinstance(value, int) and not isinstance(value, bool):
        data = np.full(n, value, dtype=_INTEGERS[field_type])
        return pa.Array.from_buffers(field_type, n, [None, pa.py_buffer(data)])
    if pa.types.is_boolean(field_type) and isinstance(value, bool):
        bits = np.packbits(np.full(n, value, dtype=bool), bitorder="little")
        return pa.Array.from_buffers(field_type, n, [None, pa.py_buffer(bits)])
    if pa.types.is_string(field_type) and isinstance(value, str):
        raw = value.encode()
        if len(raw) > SHORT_STRING:
            return None
        offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
        return pa.Array.from_buffers(field_type, n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])
    return None
