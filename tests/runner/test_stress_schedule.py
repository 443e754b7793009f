"""The stress schedules: declared in the matrix's `[load]` (per run or per arm), recorded in the
manifest, refused on engines that cannot run them, run by the fake engine (`engines/schedule.py`), and
counted in the report. Lossless arms stay token-identical to the control under every schedule; planted
faults that only show under a schedule are caught with it and never without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import helpers.cli
import pytest
from runner_support import Invoke, write_matrix

from kvgate.rundir.manifest import read_manifest
from kvgate.rundir.store import read_results
from kvgate.treatments.matrix import parse_matrix

BODY = '[matrix]\ncontrol = "full"\ncandidates = ["prefix-reuse"]\naa_replicate = false\n'
LOSSLESS = '[matrix]\ncontrol = "full"\ncandidates = ["prefix-reuse", "offload-host"]\naa_replicate = false\n'
SCHEDULES = {
    "abort": "abort_percent = 40",
    "interleave": "interleave = true",
    "resend": "resend_percent = 40",
    "repeat": "repeat = 3",
    "every": "abort_percent = 40\ninterleave = true\nresend_percent = 40\nrepeat = 2\nconcurrency = 4",
}


@pytest.fixture(scope="module")
def edges(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped block-edges suite (12 cases) frozen with the word tokenizer."""
    path = tmp_path_factory.mktemp("edges") / "edges.parquet"
    result = helpers.cli.kvgate("freeze", "block-edges", "-o", path)
    assert result.exit_code == 0, result.output
    return path


def run(kvgate: Invoke, workload: Path, matrix: Path, run_dir: Path) -> tuple[int, str, dict[str, Any]]:
    """`kvgate run` on the fake engine, then its report JSON: (exit code, stderr, report)."""
    result = kvgate("run", "--engine", "fake", "-w", workload, "-m", matrix, "--run-dir", run_dir, "--quiet")
    report = kvgate("report", run_dir, "--format", "json")
    return result.exit_code, result.stderr, json.loads(report.stdout)


def test_load_is_read_per_run_or_per_arm_and_recorded(tmp_path: Path) -> None:
    load = "[load]\nabort_percent = 10\nrepeat = 2\n"
    text = BODY + load + "[arm.prefix-reuse]\nabort_percent = 30\ninterleave = true\n"
    matrix = parse_matrix(write_matrix(tmp_path / "m.toml", text))
    assert (matrix.abort_percent_for("full"), matrix.abort_percent_for("prefix-reuse")) == (10, 30)
    assert matrix.load_for("full") == {"abort_percent": 10, "repeat": 2}
    assert matrix.load_for("prefix-reuse") == {"abort_percent": 30, "interleave": True, "repeat": 2}
    assert parse_matrix(write_matrix(tmp_path / "n.toml", BODY)).load_for("full") == {}
    old = parse_matrix(write_matrix(tmp_path / "o.toml", BODY + "abort_percent = 20\n"))  # in [matrix]
    assert old.load_for("prefix-reuse") == {"abort_percent": 20}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (BODY + "abort_percent = 101\n", "abort_percent must be in [0, 100], got 101"),
        (BODY + "[load]\nrepeat = 0\n", "repeat must be in [1, 100], got 0"),
        (BODY + "[load]\ninterleave = 1\n", "interleave must be a bool, got 1"),
        (BODY + "[load]\nsoak = 2\n", "soak"),
        (BODY + "repeat = 2\n[load]\nrepeat = 3\n", "repeat set in both [matrix] and [load]"),
        (BODY + "[arm.prefix-reuse]\nresend_percent = -1\n", "resend_percent must be in [0, 100], got -1"),
    ],
)
def test_a_bad_load_is_refused_in_one_line(
    kvgate: Invoke, accept_workload: Path, tmp_path: Path, body: str, message: str
) -> None:
    matrix = write_matrix(tmp_path / "m.toml", body)
    result = kvgate("run", "--engine", "fake", "-w", accept_workload, "-m", matrix, "-o", tmp_path / "runs")
    assert result.exit_code == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert not list((tmp_path / "runs").glob("*/manifest.json"))


def test_an_engine_that_cannot_run_a_schedule_refuses_it_before_the_run(
    kvgate: Invoke, accept_workload: Path, tmp_path: Path
) -> None:
    matrix = write_matrix(tmp_path / "m.toml", BODY + "[arm.prefix-reuse]\ninterleave = true\nrepeat = 2\n")
    result = kvgate("run", "--engine", "hf", "-w", accept_workload, "-m", matrix, "-o", tmp_path / "runs")
    assert result.exit_code == 2, result.output
    assert (
        "sets interleave, repeat; engine 'hf' cannot run that stress schedule (it runs none)" in result.stderr
    )
    aborts = write_matrix(tmp_path / "a.toml", BODY + "[load]\nabort_percent = 10\nrepeat = 2\n")
    result = kvgate("run", "--engine", "vllm", "-w", accept_workload, "-m", aborts, "-o", tmp_path / "runs")
    assert result.exit_code == 2 and "sets abort_percent; engine 'vllm' cannot run" in result.stderr
    assert "use --engine server or fake" in result.stderr
    assert not list((tmp_path / "runs").glob("*/manifest.json"))


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_lossless_arms_stay_token_identical_under_every_schedule_and_the_report_counts_it(
    kvgate: Invoke, edges: Path, tmp_path: Path, schedule: str
) -> None:
    matrix = write_matrix(
        tmp_path / "m.toml", LOSSLESS + "[load]\nkv_blocks = 4\n" + SCHEDULES[schedule] + "\n"
    )
    code, stderr, report = run(kvgate, edges, matrix, tmp_path / "run")
    assert code == 3 and "defect" not in stderr, stderr  # 12 cases cannot pass; a divergence would fail
    rows = read_results(
        tmp_path / "run", ["arm", "case_id", "first_divergence", "output_token_ids"]
    ).to_pylist()
    control = {r["case_id"]: r["output_token_ids"] for r in rows if r["arm"] == "full"}
    for arm in ("prefix-reuse", "offload-host"):
        mine = [r for r in rows if r["arm"] == arm]
        assert len(mine) == 12 and all(r["output_token_ids"] == control[r["case_id"]] for r in mine)
    manifest = read_manifest(tmp_path / "run")
    declared = parse_matrix(matrix).load_for("prefix-reuse")
    assert all({k: e[k] for k in declared} == declared for e in manifest["arms"].values())
    for arm in report["arms"]:
        stress, counts = arm["stress"], arm["stress"]["counts"]
        assert {k: stress["load"][k] for k in declared} == declared
        assert stress["boundary_cases"] == {"below": 4, "at": 4, "above": 4}
        repeat = declared.get("repeat", 1)
        expected = {
            "abort": counts["aborts"] > 0,
            "interleave": counts["interleaved"] == 12 * repeat,
            "resend": 0 < counts["resent"] < 12 * repeat and counts["churned"] > 0,
            "repeat": counts["repeats"] == 12 * (repeat - 1) and counts["repeat_changed"] == 0,
        }
        assert all(expected.values()) if schedule == "every" else expected[schedule], counts
    assert report["control"]["stress"]["counts"]["requests"] >= 12


@pytest.mark.parametrize(
    ("fault", "schedule", "without"),
    [
        ("stale_after_abort", "abort_percent = 50", "interleave = true"),
        ("stale_after_churn", "resend_percent = 50", "abort_percent = 50"),
        ("stale_after_churn", "repeat = 2", "interleave = true"),
    ],
)
def test_a_fault_that_shows_only_under_a_schedule_is_a_defect_naming_it(
    kvgate: Invoke, edges: Path, tmp_path: Path, fault: str, schedule: str, without: str
) -> None:
    faults = f"[faults.prefix-reuse]\n{fault} = true\n"
    caught = write_matrix(tmp_path / "caught.toml", BODY + f"[load]\n{schedule}\n" + faults)
    code, stderr, report = run(kvgate, edges, caught, tmp_path / "caught")
    defects = [line for line in stderr.splitlines() if line.startswith("kvgate: defect: lossless arm")]
    assert code == 1 and defects, stderr
    assert all(schedule.replace(" = ", " ") in line for line in defects if "diverged" in line)
    counts = report["arms"][0]["stress"]["counts"]
    assert counts["aborts" if "abort" in schedule else "churned"] > 0
    missed = write_matrix(tmp_path / "missed.toml", BODY + f"[load]\n{without}\n" + faults)
    code, stderr, _ = run(kvgate, edges, missed, tmp_path / "missed")
    assert code == 3 and "defect" not in stderr, stderr
