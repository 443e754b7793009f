"""Keep freed large blocks for reuse: glibc's malloc told not to hand big blocks back to the kernel.

By default glibc serves a block above its mmap threshold (128 KiB at start, raised as mmapped blocks are
freed, up to 32 MiB) with fresh pages from the kernel and unmaps it when freed, and it trims a heap top
that is more than its trim threshold free. A process that allocates and frees big arrays over and over
(the report's per-arm columns, a model's activations at every step) then page-faults on every new one
and the kernel zeroes each page again. `keep_freed_memory` fixes the mmap threshold at its maximum and
turns trimming off (mallopt(3): M_MMAP_THRESHOLD, M_TRIM_THRESHOLD), so freed blocks stay in the heap and
are reused. The price: the heap keeps its high-water mark until the process ends. Blocks above 32 MiB are
still mapped afresh (glibc's limit), and allocators other than glibc's (pyarrow's memory pool) are
untouched.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""mallopt(3) parameters, from glibc's malloc.h."""
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024
"""The largest mmap threshold glibc accepts on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)."""
NEVER_TRIM = -1
"""M_TRIM_THRESHOLD's value read as the largest size: the heap top is never given back."""


def glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (it names its version), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None  # e.g. musl
    return libc


def keep_freed_memory() -> bool:
    """Make glibc keep freed large blocks (up to 32 MiB each) for reuse instead of returning them to the
    kernel, for the rest of the process. True when glibc took both settings; False (nothing changed)
    on another C library or platform."""
    libc = glibc()
    if libc is None:
        return False
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) & bool(mallopt(M_TRIM_THRESHOLD, NEVER_TRIM))
