"""Some rows of a Parquet file's columns, read batch by batch so that only those rows are kept.

A report shows ~10,000 failing examples of a 250,000-case workload with their expected answers and
prompts: read whole, those columns take ~50 MB of fresh pages (decoded strings and the buffers they grow
through) for a few hundred kilobytes kept. Read a batch at a time, the rows wanted are taken from each
batch and the rest is freed before the next, so memory stays near one batch; the read stops after the
last row wanted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kvgate.arrow_numpy import int64_array

BATCH_ROWS = 16_384


def take_rows(
    parquet: pq.ParquetFile, columns: Sequence[str], rows: np.ndarray, batch_rows: int = BATCH_ROWS
) -> pa.Table:
    """`columns` of `parquet` at `rows` (row numbers in the file, in any order, repeats allowed, each
    below its row count), in the order of `rows`."""
    rows = np.asarray(rows, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    wanted = rows[order]
    schema = parquet.schema_arrow
    pieces = []
    start = 0
    for batch in parquet.iter_batches(batch_size=batch_rows, columns=list(columns), use_threads=False):
        end = start + batch.num_rows
        lo, hi = np.searchsorted(wanted, [start, end])
        if hi > lo:
            pieces.append(batch.take(int64_array(wanted[lo:hi] - start)))
        start = end
        if hi == len(wanted):
            break
    table = pa.Table.from_batches(pieces, schema=pa.schema([schema.field(c) for c in columns]))
    if len(table) != len(rows):
        raise IndexError(f"rows up to {int(rows.max())} asked of a file of {start} rows")
    back = np.empty_like(order)
    back[order] = np.arange(len(order), dtype=np.int64)
    return table.take(int64_array(back))
