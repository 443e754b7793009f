"""The runs under a runs directory, one summary each: what `kvgate runs` lists and `analysis.runs_df` holds.

A run is a folder holding `manifest.json` (`<runs-dir>/<run id>/`, as `kvgate run -o` makes them). Its
summary is read from the manifest, its decision from its report built on the declared policy (the run
verified as `kvgate report` verifies it; the decisions alone, no examples or gains); a run that cannot
be reported (edited, still being written, or not readable) keeps its row with decision "unreadable" and
the reason in `note`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kvgate.errors import KvgateError
from kvgate.rundir.manifest import MANIFEST, read_manifest

UNREADABLE = "unreadable"
FIELDS = (
    "run_id",
    "created_at",
    "matrix",
    "candidates",
    "engine",
    "model",
    "n_cases",
    "decision",
    "exit_code",
)


def run_dirs(runs_dir: Path) -> list[Path]:
    """The run folders directly under `runs_dir`, oldest first (run ids sort by time)."""
    if not runs_dir.is_dir():
        return []
    return sorted(p for p in runs_dir.iterdir() if p.is_dir() and (p / MANIFEST).is_file())


def run_summary(run_dir: Path) -> dict[str, Any]:
    """One run's FIELDS, `path` and `note` (why it is unreadable, else null)."""
    from kvgate.report.analysis.build import report_and_rows
    from kvgate.rundir.integrity import verify_run

    row: dict[str, Any] = dict.fromkeys(FIELDS) | {"path": printable(run_dir), "note": None}
    if row["path"] != str(run_dir):
        return row | {"decision": UNREADABLE, "note": "its folder name is not UTF-8: rename it"}
    try:
        manifest = read_manifest(run_dir)
        row |= {
            "run_id": manifest["run_id"],
            "created_at": manifest["created_at"],
            "matrix": manifest.get("matrix_name"),
            "candidates": list(manifest["matrix"]["candidates"]),
            "engine": manifest["engine"].get("engine"),
            "model": manifest["model"].get("name"),
            "n_cases": manifest.get("n_cases"),
        }
        check = verify_run(run_dir, manifest, parts=False)  # each part checked as it is read
        report, _ = report_and_rows(run_dir, manifest, evidence=False, check=check)
        row |= {"decision": report.decision, "exit_code": report.exit_code}
    except (KvgateError, OSError, KeyError, TypeError) as exc:
        row |= {"decision": UNREADABLE, "note": str(exc) or type(exc).__name__}
    return row


def printable(path: Path) -> str:
    """`path` as text that prints anywhere: bytes that are not UTF-8 shown as \\xNN escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def list_runs(runs_dir: Path) -> list[dict[str, Any]]:
    """Every run under `runs_dir`, oldest first."""
    return [run_summary(d) for d in run_dirs(runs_dir)]
