"""Helpers for the executors' tests: a matrix with every kind of pass, stored rows, reports compared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from kvgate.rundir.store import part_paths

MATRIX = """
[matrix]
control = "full"
candidates = ["streaming-50", "fp8-e4m3", "prefix-reuse"]
aa_replicate = true
confirm_reruns = 1
seed = {seed}

[arm.prefix-reuse]
batch_size = 4

[faults."*"]
latency_s = {latency}

[faults.fp8-e4m3]
wrong_answer_rate = 0.2
error_rate = 0.05

[faults.prefix-reuse]
stale_reuse_rate = 0.1
{extra}
"""
KEY = ("arm", "replicate", "case_id", "attempt")


def write_matrix(path: Path, latency: float = 0.0, seed: int = 0, extra: str = "") -> Path:
    path.write_text(MATRIX.format(latency=latency, seed=seed, extra=extra), encoding="utf-8")
    return path


def only_run(runs_dir: Path) -> Path:
    (found,) = [p for p in runs_dir.iterdir() if (p / "manifest.json").exists()]
    return found


def stored_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Every stored row without its measured timings, sorted by key."""
    rows = [row for part in part_paths(run_dir) for row in pq.read_table(part).to_pylist()]
    for row in rows:
        row.pop("ttft_s")
        row.pop("latency_s")
    return sorted(rows, key=lambda r: tuple(r[k] for k in KEY))


def keys(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [tuple(r[k] for k in KEY) for r in rows]


def comparable(report_json: str) -> str:
    """The report without what differs between two runs of one spec: the run's identity and
    provenance block, and each arm's measured TTFT and latency."""
    data = json.loads(report_json)
    data.pop("run", None)
    for arm in data["arms"]:
        for key in ("ttft_s", "latency_s"):
            (arm.get("gains") or {}).pop(key, None)
    return json.dumps(data, indent=2, sort_keys=True)
