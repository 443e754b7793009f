"""Helpers for the runner's tests: matrices on disk and the stored rows of a run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from click.testing import Result

from kvgate.rundir.store import part_paths

DATA = Path(__file__).parent / "data"
TIMING = ("ttft_s", "latency_s")
KEY = ("arm", "replicate", "case_id", "attempt")
Invoke = Callable[..., Result]
"""The `kvgate` fixture: `kvgate(*args)` runs the CLI in-process."""


def write_matrix(path: Path, body: str) -> Path:
    path.write_text(body, encoding="utf-8")
    return path


def stored_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Every stored result row (as the store reads them: superseded parts left out), timing columns
    dropped, sorted by (arm, replicate, case_id, attempt)."""
    rows = []
    for part in part_paths(run_dir):
        rows += pq.read_table(part).to_pylist()
    for row in rows:
        for column in TIMING:
            row.pop(column)
    return sorted(rows, key=lambda r: tuple(r[k] for k in KEY))


def only_run(runs_dir: Path) -> Path:
    """The one run directory under `runs_dir`."""
    found = [p for p in runs_dir.iterdir() if (p / "manifest.json").exists()]
    assert len(found) == 1, found
    return found[0]


def part_sizes(run_dir: Path) -> list[int]:
    """Rows per stored part, over every part of the run the store reads."""
    return [pq.ParquetFile(p).metadata.num_rows for p in part_paths(run_dir)]
