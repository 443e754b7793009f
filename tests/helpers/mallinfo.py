"""The prelude of a child-process script that reads glibc's own heap accounting (`mallinfo2`)."""

from __future__ import annotations

MALLINFO2_PRELUDE = """
import ctypes


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost")]


libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
"""
"""Defines `libc` with `mallinfo2()` (its fields: `arena` the heap, `hblkhd` the blocks mapped on their
own), `malloc` and `free` typed for ctypes."""
