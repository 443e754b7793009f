"""Runtime settings for a kvgate command that reads, computes, writes and exits (`kvgate report`).

Three costs such a process pays for nothing, measured on a report over 10⁶ result rows
(bench/bench_report.py):

- OpenBLAS's worker threads: numpy's and scipy's OpenBLAS each start one thread per core when they load,
  and those spin waiting for work; the report's matrix products are small (stats.unconditional: 299 ψ
  × ≤ 4,001 counts) and gain nothing from them. One thread saves ~0.3 CPU-s, and makes the products'
  last bits the same on every machine (a product split over threads is summed in another order).
- Python's cycle collector: the report's objects live until it is written, and each collection walks
  them and every imported module again (~0.12 CPU-s); and when the command is the process's last act,
  the pass the collector makes as it is switched back on and the interpreter's pass at exit walk
  everything the command allocated once more (~0.1–0.3 CPU-s): frozen instead (gc.freeze: still freed
  when its last reference goes, never walked for cycles).
- Fresh pages: the report allocates and frees its columns by the hundred (Arrow buffers, numpy arrays of
  10⁶ rows); Arrow's default pool (mimalloc) and glibc's malloc hand freed ones back to the kernel, and
  each new one page-faults and is zeroed again. Arrow's buffers from the C library's malloc instead, with
  glibc keeping freed blocks for reuse (kvgate.allocator): ~0.88× the CPU, and less peak memory.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from kvgate.allocator import keep_freed_memory


def single_blas_thread() -> None:
    """Ask OpenBLAS for one thread, before numpy loads it (a process that has imported numpy keeps its
    threads); a user's own OPENBLAS_NUM_THREADS wins."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def reuse_freed_memory() -> bool:
    """Arrow's buffers from the C library's malloc (ARROW_DEFAULT_MEMORY_POOL=system, before pyarrow
    loads; a user's own choice wins) and glibc keeping freed blocks (kvgate.allocator), for the rest of
    the process: only for one whose command is its last act. True when glibc took its settings."""
    if "pyarrow" not in sys.modules:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    return keep_freed_memory()


PROCESS = "the kvgate process"
"""The click context object of the console entry point (kvgate.cli.main): the process ends with the
command. A command invoked in-process (a test's CliRunner) has none."""


@contextmanager
def without_cycle_collection(last_act: bool = False) -> Iterator[None]:
    """The cycle collector off inside the block (reference counting still frees what is dropped), back
    as it was after it; with `last_act` (the process ends with the block) what is alive then is frozen
    first."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if last_act:
            gc.freeze()
        if enabled:
            gc.enable()
