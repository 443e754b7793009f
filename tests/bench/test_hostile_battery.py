"""The hostile battery's generator (bench/hostile_battery.py) still makes ≥ 2,000 cases over every class
the hardening acceptance names, from inputs the tree under test freezes and runs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
CLASSES = {"cli", "policy", "matrix", "suite", "trace", "workload", "rundir", "special", "encoding",
           "size", "readonly", "version", "server", "secret", "newuser"}  # fmt: skip


@pytest.mark.slow  # makes the battery's inputs: a freeze, a fake run and forged Parquet files
def test_the_battery_generates_at_least_2000_cases_over_every_class() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "hostile_battery.py"), "--tree", str(BENCH.parent), "--count"],
        capture_output=True, text=True, timeout=300, cwd=BENCH.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-600:]
    line = done.stdout.strip().splitlines()[-1]
    total, per_class = line.split(" cases: ", 1)
    counts = ast.literal_eval(per_class)
    assert int(total) >= 2000 and set(counts) == CLASSES, line
    assert all(n >= 10 for n in counts.values()), counts
