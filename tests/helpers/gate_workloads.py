"""Workloads frozen with the word tokenizer for the gate's simulations and sequential runs (the slice
structure does not depend on the model)."""

from __future__ import annotations

import fcntl
from pathlib import Path

from kvgate.shipped import suites_dir
from kvgate.workload.freeze import freeze
from kvgate.workload.tokenizer import WordTokenizer

SUITES = suites_dir()


def freeze_scaled_ruler(out: Path, factor: int) -> None:
    """`ruler` with every cell's case count multiplied (factor 10: the 1,500-case ruler), frozen to `out`."""
    text = (SUITES / "ruler.toml").read_text()
    for per_cell in (2, 4):
        text = text.replace(f"per_cell = {per_cell}\n", f"per_cell = {per_cell * factor}\n")
    suite = out.with_suffix(".toml")
    suite.write_text(text.replace('name = "ruler"', f'name = "ruler-x{factor}"'))
    freeze([str(suite)], out, WordTokenizer(), seed=0)


class Workloads:
    """Workloads by name, frozen on first use: `ruler` (150 cases), `ruler-1500`, `reuse`.

    `tmp` may be shared by several processes (xdist's workers): each name is frozen under a lock on
    `<name>.lock` there by the first process to ask; the others find its file (written atomically)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp

    def __getitem__(self, name: str) -> Path:
        out = self.tmp / f"{name}.parquet"
        with (self.tmp / f"{name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not out.exists() and name == "reuse":
                freeze(["reuse"], out, WordTokenizer(), seed=0)
            elif not out.exists():
                freeze_scaled_ruler(out, 10 if name == "ruler-1500" else 1)
        return out
