"""`kvgate report` reads a run's workload through the checks `kvgate run` makes (workload.schema's
`open_workload`): a workload that `run` refuses, `report` refuses too, with the same one line (exit 2)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers.cli import kvgate

from kvgate.rundir.part_index import file_sha256
from kvgate.workload.schema import META_KEY


def _n_cases_off_by_one(meta: dict) -> None:
    meta["n_cases"] -= 1


def _bad_slice_name(meta: dict) -> None:
    meta["slice_columns"] = [*meta["slice_columns"], "no such column!"]


def _future_version(meta: dict) -> None:
    meta["schema_version"] += 1


DEFECTS: dict[str, tuple[Callable[[dict], None], str]] = {
    "row count": (_n_cases_off_by_one, " has 48 rows; its metadata says 47"),
    "slice name": (_bad_slice_name, ": kvgate metadata is malformed at slice_columns/3"),
    "newer version": (_future_version, " has schema_version 2; this kvgate reads 1: upgrade kvgate"),
}


@pytest.mark.parametrize("defect", DEFECTS, ids=list(DEFECTS))
def test_report_refuses_the_workloads_run_refuses(fixed_run: Path, tmp_path: Path, defect: str) -> None:
    edit, message = DEFECTS[defect]
    run = tmp_path / fixed_run.name
    shutil.copytree(fixed_run, run)
    manifest = json.loads((run / "manifest.json").read_text())
    bad = tmp_path / "bad.parquet"
    table = pq.read_table(manifest["workload_path"])
    meta = json.loads(table.schema.metadata[META_KEY])
    edit(meta)
    pq.write_table(table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()}), bad)
    # The run names the edited file and its bytes: only the read path's checks stand between it and a verdict.
    manifest.update(workload_path=str(bad), workload_file_sha256=file_sha256(bad))
    (run / "manifest.json").write_text(json.dumps(manifest))

    refused = kvgate("run", "--engine", "fake", "-w", bad, "-o", tmp_path / "runs", "--quiet")
    reported = kvgate("report", run, "--format", "json")
    for result in (refused, reported):
        assert result.exit_code == 2, result.output
        (line,) = result.output.splitlines()
        assert line.startswith(f"kvgate: error: workload {bad}{message}")
