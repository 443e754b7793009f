"""End to end on the fake engine: planted faults → `kvgate run` → `kvgate report`, counts as planted."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kvgate.cli import cli
from kvgate.engines.fake import hits
from kvgate.workload.schema import read_workload

MATRIX = """[matrix]
control = "full"
candidates = ["snapkv-50", "fp8-e4m3", "snapkv-50+fp8"]
confirm_reruns = 1
[faults.snapkv-50]
wrong_answer_rate = 0.3
[faults.fp8-e4m3]
wrong_answer_rate = 0.25
seed = 1
["faults"."snapkv-50+fp8"]
wrong_answer_rate = 0.45
"""


def test_planted_faults_are_counted_attributed_and_fail_the_gate(
    tmp_path: Path, smoke_workload: Path
) -> None:
    matrix = tmp_path / "faults.toml"
    matrix.write_text(MATRIX)
    runs = tmp_path / "runs"
    result = CliRunner().invoke(
        cli,
        ["run", "--engine", "fake", "-w", str(smoke_workload), "-m", str(matrix), "-o", str(runs), "--quiet"],
    )
    assert result.exit_code == 1, result.output
    run_dir = next(p for p in runs.iterdir() if (p / "manifest.json").exists())
    report = CliRunner().invoke(cli, ["report", str(run_dir), "--format", "json"])
    assert report.exit_code == 1
    data = json.loads(report.stdout)
    ids = [c.case_id for c in read_workload(smoke_workload).cases]
    planted = {
        "snapkv-50": {i for i in ids if hits("wrong", 0.3, 0, i)},
        "fp8-e4m3": {i for i in ids if hits("wrong", 0.25, 1, i)},
        "snapkv-50+fp8": {i for i in ids if hits("wrong", 0.45, 0, i)},
    }
    arms = {a["arm"]: a for a in data["arms"]}
    for name, failed in planted.items():
        everything = arms[name]["slices"][0]
        assert (everything["cache_induced_failures"], everything["control_passes"]) == (len(failed), len(ids))
        assert arms[name]["reproducible_failures"] == len(failed)  # the fake engine fails again on re-run
        assert arms[name]["flaky_failures"] == 0
    composite = planted["snapkv-50+fp8"]
    eviction, quantize = planted["snapkv-50"], planted["fp8-e4m3"]
    assert arms["snapkv-50+fp8"]["attribution"]["classes"] == {
        "eviction": len(composite & eviction - quantize),
        "quantize": len(composite & quantize - eviction),
        "both": len(composite & eviction & quantize),
        "interaction": len(composite - eviction - quantize),
        "unattributed": 0,
    }
    assert data["noise_floor"]["flips"] == 0
    assert data["decision"] == "fail"
