"""Starting a `kvgate` command to interrupt it, and what an interrupted run is compared by: shared by
the crash trials (`crash_trials.py`) and the kill -9 test (tests/runner/test_kill9.py).

Two launchers: `start` runs the real command line in a child process (its imports included, seconds
on a busy machine); `forked` forks it from a forkserver that has kvgate imported, so a kill lands
within a second of the start. A forked child inherits the forkserver's resident memory into its
`ru_maxrss`: a measurement of a child's peak RSS starts it from a small launcher of its own instead
(as tests/engines/server/test_misbehaving_server.py does), never from here. This module imports
nothing of kvgate at the top, so the forkserver's children import only what `WARM` preloads.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
from multiprocessing.process import BaseProcess
from pathlib import Path

KVGATE = [sys.executable, "-c", "from kvgate.cli import main; main()"]
"""The `kvgate` command line of the Python running this (the checkout on PYTHONPATH wins)."""
WARM = [  # installed modules only: a forkserver of Python 3.11 cannot import from the tests' folder
    "kvgate.cli.run", "kvgate.runner.job", "kvgate.engines.fake", "kvgate.validators.registry",
    "pyarrow.dataset", "jsonschema",
]  # fmt: skip
TIMESTAMP = re.compile(r'^\s*"[a-z_]*(?:_at|timestamp)": "[^"]*",?\n', re.MULTILINE)
RUN_TIME = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-")
"""The time part of a run id (two runs of one spec differ in it alone)."""
TIMINGS = ("ttft_s", "latency_s")
"""Measured wall-clock columns: they differ run to run, so comparisons leave them out."""


def start(argv: list[object], cwd: Path | None = None) -> subprocess.Popen[str]:
    """`kvgate ARGV…` on its real command line in a child process; stdout discarded, stderr piped."""
    return subprocess.Popen(
        [*KVGATE, *map(str, argv)], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def forked(argv: list[object], cwd: Path) -> BaseProcess:
    """`kvgate ARGV…` in `cwd`, in a process forked from an interpreter that has kvgate imported already
    (output discarded), so a kill lands within a second of the start instead of after seconds of imports."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(WARM)
    process = context.Process(target=run_cli, args=([str(a) for a in argv], str(cwd)))
    process.start()
    return process


def run_cli(argv: list[str], cwd: str) -> None:
    """`kvgate ARGV…` in `cwd` with its output discarded (the forked process's target)."""
    from kvgate.cli import main

    os.chdir(cwd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.argv = ["kvgate", *argv]
    main()


def stored_parts(root: Path) -> int:
    """Parts stored so far by the runs under `root` (a run directory or a folder of them): part numbers
    only grow, so merging parts does not lower the count."""
    from kvgate.rundir.store import next_part_number

    return sum(next_part_number(arm_dir) for arm_dir in root.glob("**/results/*") if arm_dir.is_dir())


def alive(process: subprocess.Popen[str] | BaseProcess) -> bool:
    return process.is_alive() if isinstance(process, BaseProcess) else process.poll() is None


def wait_for_part(
    process: subprocess.Popen[str] | BaseProcess, root: Path, before: int, timeout: float = 30.0
) -> bool:
    """Until a run under `root` stores a part past `before` (it is generating), `process` ends or
    `timeout` passes; whether a part was stored."""
    deadline = time.monotonic() + timeout
    while stored_parts(root) <= before and alive(process) and time.monotonic() < deadline:
        time.sleep(0.005)
    return stored_parts(root) > before


def comparable_report(report_json: str) -> str:
    """A `kvgate report --format json` text without what differs between two runs of one spec: its
    timestamps, the time in its run ids and each arm's measured TTFT and latency."""
    data = json.loads(RUN_TIME.sub("", TIMESTAMP.sub("", report_json)))
    for arm in data["arms"]:
        for key in TIMINGS:
            (arm.get("gains") or {}).pop(key, None)
    return json.dumps(data, indent=2, sort_keys=True)
