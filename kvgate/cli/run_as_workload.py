"""A run's folder or one of its own files given where a frozen workload belongs (`kvgate run -w
RUN/results/index.json` was called "a trace, not a frozen workload"): named for what it is, with what to
give instead, in one line."""

from __future__ import annotations

from pathlib import Path

from kvgate.cli.output_path import run_around, run_holding
from kvgate.errors import BadInput, KvgateError
from kvgate.rundir.manifest import MANIFEST
from kvgate.rundir.part_index import INDEX

OWN_FILES = {MANIFEST: "the manifest", ".lock": "the lock", "engine.log": "the engine log"}
"""A run's files beside its results, by name: what each is."""


def run_part(path: Path) -> tuple[Path, str] | None:
    """(the run, what `path` is: "a run's folder", "the manifest of run R", …) when `path` is a run's
    folder or one of its own files; else None."""
    if path.is_dir() and run_around(path) == path:
        return path, "a run's folder"
    run = run_holding(path)
    if run is None:
        return None
    what = "a file"
    if path.parent == run:
        what = OWN_FILES.get(path.name, what)
    elif path == run / "results" / INDEX:
        what = "the results index"
    elif run / "results" in path.parents and path.suffix == ".parquet":
        what = "a results part"
    return run, f"{what} of run {run}"


def refuse_run_as_workload(path: Path, option: str, resume: bool = False) -> None:
    """BadInput when `path`, given to `option` as a frozen workload, is a run's folder or file: what it is,
    the workload that run gated (when its manifest says), and (`resume`) how to continue that run."""
    found = run_part(path)
    if found is None:
        return
    run, what = found
    gated = _gated_workload(run)
    source = f"run {run} gated {gated}" if gated else "`kvgate freeze` writes one"
    instead = f"a frozen workload .parquet ({source})"
    more = f", or continue that run with `kvgate run --resume {run}`" if resume else ""
    raise BadInput(f"{option} {path} is {what}, not a frozen workload: give {instead}{more}")


def _gated_workload(run: Path) -> str:
    """The workload the run's manifest names ("" when it cannot be read)."""
    from kvgate.rundir.manifest import read_manifest

    try:
        return str(read_manifest(run).get("workload_path") or "")
    except (KvgateError, OSError):
        return ""
