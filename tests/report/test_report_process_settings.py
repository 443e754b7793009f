"""`kvgate report` runs with one OpenBLAS thread (unless the user set OPENBLAS_NUM_THREADS) and without the
cycle collector (no collection while its body runs), which is back on once the command returns; run by
the console entry point, whose process ends with it, Arrow allocates through malloc, glibc keeps freed
blocks, and what is alive at the end is frozen (kvgate.cli.one_shot). The thread count is read from each
OpenBLAS the process loaded (numpy's and scipy's), through its own getter; the heap from mallinfo2.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.mallinfo import MALLINFO2_PRELUDE

from kvgate import allocator
from kvgate.cli.one_shot import without_cycle_collection

CHECK = """
import ctypes, gc, json, sys
from click.testing import CliRunner
import kvgate.cli.findings, kvgate.cli.report
from kvgate.cli import cli
seen = []  # (collector on, collections so far) as the command's body starts and as it ends


def spy(module, name):
    original = getattr(module, name)

    def spying(*args, **kwargs):
        seen.append((gc.isenabled(), sum(g["collections"] for g in gc.get_stats())))
        return original(*args, **kwargs)

    setattr(module, name, spying)


spy(kvgate.cli.report, "parse_formats")
spy(kvgate.cli.findings, "exit_code_with_findings")
result = CliRunner().invoke(cli, ["report", sys.argv[1], "--format", "json"])
assert result.exit_code == 1, result.output
threads = {}
for path in sorted({line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line}):
    lib = ctypes.CDLL(path)
    for name in ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
                 "openblas_get_num_threads64_", "openblas_get_num_threads"):
        if hasattr(lib, name):
            threads[path] = getattr(lib, name)()
            break
facts = {"threads": threads, "body": seen[:], "collector_after": gc.isenabled()}
facts["frozen_in_process"] = gc.get_freeze_count()
print(json.dumps(facts))
"""
AS_PROCESS = (
    MALLINFO2_PRELUDE
    + """
import gc, json, sys
from kvgate.cli import main
sys.argv = ["kvgate", "report", sys.argv[1], "--format", "json", "-o", "/dev/null"]
try:
    main()  # the console entry point: the process would end here
except SystemExit as exit:
    code = exit.code
import pyarrow
before = libc.mallinfo2().hblkhd
block = libc.malloc(16 << 20)
print(json.dumps({
    "exit": code, "frozen": gc.get_freeze_count(), "arrow_pool": pyarrow.default_memory_pool().backend_name,
    "mapped_afresh": libc.mallinfo2().hblkhd - before,
}))
"""
)


def report_process(run: Path, script: str = CHECK) -> dict[str, object]:
    settings = ("OPENBLAS_NUM_THREADS", "ARROW_DEFAULT_MEMORY_POOL")
    environment = {k: v for k, v in os.environ.items() if k not in settings}
    out = subprocess.run(
        [sys.executable, "-c", script, str(run)],
        capture_output=True, text=True, timeout=120, check=True, env=environment,
    )  # fmt: skip
    result: dict[str, object] = json.loads(out.stdout)
    return result


LINUX_MULTICORE = sys.platform.startswith("linux") and (os.cpu_count() or 1) >= 2
"""Where OpenBLAS would start workers and /proc/self/maps names the libraries loaded."""


@pytest.mark.skipif(not LINUX_MULTICORE, reason="Linux, 2+ cores")
def test_report_runs_one_blas_thread_without_the_cycle_collector(fixed_run: Path) -> None:
    mine = report_process(fixed_run)
    (on_at_start, start), (on_at_end, end) = mine["body"]  # type: ignore[misc]
    assert not on_at_start and not on_at_end and end == start  # no collection in between
    assert mine["collector_after"] is True and mine["frozen_in_process"] == 0
    if not mine["threads"]:
        pytest.skip("no OpenBLAS with a thread-count getter loaded")
    assert set(mine["threads"].values()) == {1}  # type: ignore[union-attr]


def test_a_users_thread_count_wins_and_a_loaded_numpy_is_left_alone() -> None:
    check = (
        "import os, sys; from kvgate.cli.one_shot import single_blas_thread; single_blas_thread();"
        "print(os.environ.get('OPENBLAS_NUM_THREADS'))"
    )
    for env, preload, expected in (({"OPENBLAS_NUM_THREADS": "2"}, "", "2"), ({}, "import numpy;", "None")):
        environment = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | env
        out = subprocess.run(
            [sys.executable, "-c", preload + check],
            capture_output=True, text=True, timeout=60, check=True, env=environment,
        )  # fmt: skip
        assert out.stdout.strip() == expected


def test_the_collector_comes_back_after_an_error() -> None:
    assert gc.isenabled()
    with pytest.raises(KeyError), without_cycle_collection():
        assert not gc.isenabled()
        raise KeyError("x")
    assert gc.isenabled()


@pytest.mark.skipif(allocator.glibc() is None, reason="glibc only")
def test_the_report_process_keeps_freed_memory_and_freezes_at_its_end(fixed_run: Path) -> None:
    """Run by the console entry point: Arrow's buffers from malloc, glibc keeping freed blocks (a 16 MiB
    block comes from the heap, not a fresh mapping), and what is alive at the end frozen."""
    facts = report_process(fixed_run, AS_PROCESS)
    assert facts["exit"] == 1 and facts["arrow_pool"] == "system"
    assert facts["mapped_afresh"] == 0 and facts["frozen"] > 0  # type: ignore[operator]
