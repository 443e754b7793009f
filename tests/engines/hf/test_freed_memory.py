"""The hf engine has glibc keep freed blocks for reuse (kvgate.allocator): a forward's activations come
from the heap, not from fresh mappings the kernel must fault in and zero page by page."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from kvgate import allocator


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]  # fmt: skip


@pytest.mark.skipif(allocator.glibc() is None, reason="glibc only")
def test_after_the_engine_loads_a_16_mib_block_comes_from_the_heap(model_folder: Path) -> None:
    from hf_engine_support import shared_engine

    engine = shared_engine()
    assert engine.keeps_freed_memory
    libc = allocator.glibc()
    assert libc is not None
    libc.mallinfo2.restype = _Mallinfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = libc.mallinfo2().hblkhd  # bytes in blocks mapped apart from the heap
    block = libc.malloc(16 << 20)
    try:
        assert libc.mallinfo2().hblkhd - before == 0
    finally:
        libc.free(block)
