"""Workloads frozen with the word tokenizer for the gate's simulations and sequential runs (the slice
structure does not depend on the model)."""

from __future__ import annotations

from pathlib import Path

from kvgate.shipped import suites_dir
from kvgate.workload.freeze import freeze
from kvgate.workload.tokenizer import WordTokenizer

SUITES = suites_dir()


def scaled_ruler(tmp: Path, factor: int) -> Path:
    """`ruler` with every cell's case count multiplied (factor 10: the 1,500-case ruler)."""
    text = (SUITES / "ruler.toml").read_text()
    for per_cell in (2, 4):
        text = text.replace(f"per_cell = {per_cell}\n", f"per_cell = {per_cell * factor}\n")
    suite = tmp / f"ruler-x{factor}.toml"
    suite.write_text(text.replace('name = "ruler"', f'name = "ruler-x{factor}"'))
    out = tmp / f"ruler-x{factor}.parquet"
    freeze([str(suite)], out, WordTokenizer(), seed=0)
    return out


class Workloads:
    """Workloads by name, frozen on first use: `ruler` (150 cases), `ruler-1500`, `reuse`."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.paths: dict[str, Path] = {}

    def __getitem__(self, name: str) -> Path:
        if name not in self.paths:
            if name == "reuse":
                self.paths[name] = self.tmp / "reuse.parquet"
                freeze(["reuse"], self.paths[name], WordTokenizer(), seed=0)
            else:
                self.paths[name] = scaled_ruler(self.tmp, 10 if name == "ruler-1500" else 1)
        return self.paths[name]
