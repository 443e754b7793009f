"""Reading a workload's columns with memory bounded by the file's size, not by what it claims to hold.

Parquet's run-length and dictionary encodings let a file of a few kilobytes decode to gigabytes (one
token id repeated 10⁸ times; one long string behind every row's dictionary index). Before anything is
built, `read_bounded` checks what the footer declares — each flat column holds one value per row, the
token-id lists hold at most the budget's worth of int32, the pages decompress to at most the budget —
then reads string columns as dictionaries (their distinct values only) and sums the bytes they would
expand to; over the budget, the file is refused in one line. Only then is the table made dense.

    budget = MIN_BUDGET + RATIO × (file size in bytes)

The shipped suites, frozen, expand 7–16× from file to Arrow bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kvgate.arrow_numpy import to_numpy
from kvgate.errors import BadInput

RATIO = 64
MIN_BUDGET = 64 << 20
WIDTH = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "FLOAT": 4, "DOUBLE": 8}
"""Bytes a value of each physical type takes once read (text: its dictionary index, 4)."""


def budget_for(path: Path) -> int:
    return MIN_BUDGET + RATIO * path.stat().st_size


def read_bounded(path: Path, columns: list[str]) -> pa.Table:
    """`columns` of the workload Parquet at `path`, dense, after the checks above; pyarrow errors
    propagate for the caller to word."""
    budget = budget_for(path)
    schema = pq.read_schema(path)
    fields = [_dense_field(schema.field(c)) for c in columns]
    strings = [f.name for f in fields if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    parquet = pq.ParquetFile(path, read_dictionary=strings)
    _check_footer(parquet.metadata, columns, budget, path)
    table = parquet.read(columns=columns, use_threads=False)
    dense = sum(_dense_bytes(table[c]) for c in strings)
    if dense > budget:
        _refuse(path, f"its text columns expand to {dense} bytes", budget)
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))


def _dense_field(field: pa.Field) -> pa.Field:
    """A dictionary-typed field as its plain value type (what the reader is given)."""
    return field.with_type(field.type.value_type) if pa.types.is_dictionary(field.type) else field


def _check_footer(metadata: pq.FileMetaData, columns: list[str], budget: int, path: Path) -> None:
    """Each flat column holds one value per row; what the values take once read (fixed-width values,
    token ids, a dictionary index per text value) and what the pages unpack to are within `budget`."""
    unpacked = values = 0
    for r in range(metadata.num_row_groups):
        group = metadata.row_group(r)
        for c in range(group.num_columns):
            chunk = group.column(c)
            where = chunk.path_in_schema
            name = next((w for w in columns if where == w or where.startswith(w + ".")), None)
            if name is None:
                continue
            unpacked += chunk.total_uncompressed_size
            values += chunk.num_values * WIDTH.get(chunk.physical_type, 4)
            if where == name and chunk.num_values != group.num_rows:
                raise BadInput(
                    f"workload {path} is forged: column {name} declares {chunk.num_values} values in a row "
                    f"group of {group.num_rows} rows; freeze it again"
                )
    if values > budget:
        _refuse(path, f"its columns declare {values} bytes of values", budget)
    if unpacked > budget:
        _refuse(path, f"its pages unpack to {unpacked} bytes", budget)


def _dense_bytes(column: pa.ChunkedArray) -> int:
    """The bytes a dictionary-encoded string column takes once every row holds its own value."""
    total = 0
    for chunk in column.chunks:
        if not pa.types.is_dictionary(chunk.type):
            total += chunk.nbytes
            continue
        # arrow_numpy, not pyarrow's to_numpy: that imports pandas, which `kvgate report` must not
        lengths = to_numpy(pc.binary_length(chunk.dictionary), 0, np.int64)
        indices = to_numpy(chunk.indices, 0, np.int64)
        total += int(lengths[indices].sum()) if len(lengths) else 0
    return total


def _refuse(path: Path, claim: str, budget: int) -> None:
    raise BadInput(
        f"workload {path} would take more memory than its size allows ({claim}; at most {budget} for a "
        f"file of {path.stat().st_size} bytes): it is not a frozen workload; freeze it again"
    )
