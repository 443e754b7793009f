"""Runtime settings for a kvgate command that reads, computes, writes and exits (`kvgate report`).

Two costs such a process pays for nothing, measured on a report over 10⁶ result rows
(bench/bench_report.py):

- OpenBLAS's worker threads: numpy's and scipy's OpenBLAS each start one thread per core when they load,
  and those spin waiting for work; the report's matrix products are small (stats.unconditional: 299 ψ
  × ≤ 4,001 counts) and gain nothing from them. One thread saves ~0.3 CPU-s, and makes the products'
  last bits the same on every machine (a product split over threads is summed in another order).
- Python's cycle collector: the report's objects live until it is written, and each collection walks
  them and every imported module again (~0.12 CPU-s).
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def single_blas_thread() -> None:
    """Ask OpenBLAS for one thread, before numpy loads it (a process that has imported numpy keeps its
    threads); a user's own OPENBLAS_NUM_THREADS wins."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@contextmanager
def without_cycle_collection() -> Iterator[None]:
    """The cycle collector off inside the block (reference counting still frees what is dropped), back
    as it was after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
