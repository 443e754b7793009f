"""kvgate.allocator.keep_freed_memory, read back from glibc's own accounting (mallinfo2): a fresh process
maps a 16 MiB block afresh and unmaps it when freed; after the call the block comes from the heap and
stays there once freed. Each case runs in its own process, so the test process's allocator is untouched."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers.mallinfo import MALLINFO2_PRELUDE

from kvgate import allocator

PROBE = (
    MALLINFO2_PRELUDE
    + """
import json, sys
from kvgate.allocator import keep_freed_memory
took = keep_freed_memory() if sys.argv[1] == "keep" else None
block = libc.malloc(16 << 20)
mapped = libc.mallinfo2().hblkhd
libc.free(block)
print(json.dumps({"took": took, "mapped": mapped, "heap_after_free": libc.mallinfo2().arena}))
"""
)


def probe(mode: str) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(done.stdout)


@pytest.mark.skipif(allocator.glibc() is None, reason="glibc only")
def test_freed_large_blocks_stay_in_the_heap() -> None:
    before = probe("default")
    assert before["mapped"] >= 16 << 20  # glibc's default: a block this big is mapped afresh
    after = probe("keep")
    assert after["took"] is True
    assert after["mapped"] < 16 << 20  # served from the heap
    assert after["heap_after_free"] >= 16 << 20  # and not trimmed once freed


def test_other_c_libraries_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator.sys, "platform", "darwin")
    assert allocator.glibc() is None
    assert allocator.keep_freed_memory() is False
