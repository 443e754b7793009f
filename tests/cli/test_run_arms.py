"""`kvgate run --arms`: a subset of the matrix's candidates is run and gated, the control always with it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from click.testing import Result
from helpers.cli import kvgate
from helpers.report_schema import report_json

from kvgate.cli.arm_subset import dumps

PLANTED = (
    '[matrix]\ncontrol = "full"\ncandidates = ["streaming-50", "fp8-e4m3"]\n'
    "[faults.fp8-e4m3]\nwrong_answer_rate = 0.5\n"
)


def _run(*args: object) -> Result:
    return kvgate("run", "--engine", "fake", *args)


def test_arms_runs_and_gates_only_the_named_candidates(smoke_workload: Path, tmp_path: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(PLANTED)
    runs = tmp_path / "runs"
    result = _run("-w", smoke_workload, "-m", matrix, "-o", runs, "--json", "--arms", "streaming-50,full")
    assert result.exit_code == 3, result.output  # the planted fp8 failures are not run: no FAIL
    report = report_json(result.stdout)
    assert [a["arm"] for a in report["arms"]] == ["streaming-50"]
    assert report["arms"][0]["exit_code"] == 3 and report["run"]["matrix_name"] == "m"
    (run_dir,) = list(runs.iterdir())
    assert sorted(p.name for p in (run_dir / "results").iterdir() if p.is_dir()) == ["full", "streaming-50"]
    resumed = _run("--resume", run_dir, "--quiet")
    assert resumed.exit_code == 3, resumed.output


def test_arms_fails_the_run_when_a_named_arm_fails(smoke_workload: Path, tmp_path: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(PLANTED)
    result = _run("-w", smoke_workload, "-m", matrix, "-o", tmp_path / "runs", "--json", "--arms", "fp8-e4m3")
    report = report_json(result.stdout)
    assert result.exit_code == 1 and [(a["arm"], a["exit_code"]) for a in report["arms"]] == [("fp8-e4m3", 1)]


def test_bad_arms_are_one_line_errors(tmp_path: Path) -> None:
    for arms, words in (
        ("fp8-e4m4", "did you mean 'fp8-e4m3'"),
        ("full", "name at least one candidate"),
        ("a,,b", "separated by commas"),
    ):
        result = _run("-o", tmp_path / "runs", "--arms", arms)
        assert result.exit_code == 2 and words in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
    resumed = _run("--resume", tmp_path, "--arms", "fp8-e4m3")
    assert resumed.exit_code == 2 and "--resume" in resumed.output


def test_subset_matrices_are_written_back_as_the_same_toml() -> None:
    data = {
        "matrix": {"control": "full", "candidates": ["a", "b"], "seed": 3, "rate": 0.5, "aa_replicate": True},
        "treatment": {"a": {"kind": "eviction", "of": [{"kind": "x"}], "name with space": 'q"\n'}},
        "faults": {"*": {"wrong_answer_rate": 0.1}},
    }
    assert tomllib.loads(dumps(data)) == data
