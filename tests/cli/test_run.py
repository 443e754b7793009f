"""`kvgate run` on the command line: progress per arm on stderr, the report on stdout, `--json` and
`--quiet` for CI, and the gate's exit code."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from helpers.cli import kvgate
from helpers.report_schema import report_json

from kvgate.cli import cli
from kvgate.cli.run import stdout_to_stderr

PLANTED = (
    '[matrix]\ncontrol = "full"\ncandidates = ["streaming-50", "fp8-e4m3"]\n'
    "[faults.fp8-e4m3]\nwrong_answer_rate = 0.5\n"
)


def _run(*args: object) -> Result:
    return kvgate("run", "--engine", "fake", *args)


def test_defaults_freeze_the_smoke_suite_and_show_progress_per_arm(tmp_path: Path) -> None:
    result = _run("-o", tmp_path / "runs")
    assert result.exit_code == 3, result.output  # 24 cases: too few control passes to decide
    assert (tmp_path / "runs" / "workloads" / "smoke.words.parquet").exists()
    bars = [line for line in result.stderr.splitlines() if "cases/s" in line]
    assert [line.split()[1].rstrip(":") for line in bars] == ["full", "full", "streaming-50", "fp8-e4m3"]
    assert all(re.match(r"^\d\d:\d\d:\d\dZ ", line) for line in bars)  # each log line opens with its UTC time
    assert "(A/A replicate 1)" in bars[1] and all("done, 24/24 cases" in b for b in bars)
    assert "results: " in result.stderr
    assert "gate: INCONCLUSIVE (exit 3)" in result.stdout


def test_json_prints_only_the_report(smoke_workload: Path, tmp_path: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(PLANTED)
    result = _run("-w", smoke_workload, "-m", matrix, "-o", tmp_path / "runs", "--json")
    assert result.exit_code == 1
    report = report_json(result.stdout)
    assert report["exit_code"] == 1 and report["decision"] == "fail"
    assert result.stderr == ""


def test_quiet_names_only_the_run_and_exits_with_the_gate(smoke_workload: Path, tmp_path: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(PLANTED)
    result = _run("-w", smoke_workload, "-m", matrix, "-o", tmp_path / "runs", "--quiet")
    assert result.exit_code == 1
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert result.stdout == "" and result.stderr.splitlines() == [
        f"kvgate: run {run_dir} (after an interruption: kvgate run --resume {run_dir})"
    ]


def test_json_and_quiet_together_are_refused(smoke_workload: Path, tmp_path: Path) -> None:
    """Together they printed nothing at all: no report, and not the run's directory."""
    result = _run("-w", smoke_workload, "-o", tmp_path / "runs", "--json", "--quiet")
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert result.stderr == (
        "kvgate: error: --json prints the report JSON and --quiet prints no report: give one of them\n"
    )
    assert not (tmp_path / "runs").exists()


def test_a_file_where_the_runs_folder_belongs_is_refused_saying_what_the_option_names(
    smoke_workload: Path, tmp_path: Path
) -> None:
    """`run -o report.json` onto an existing file was "cannot create the run directory
    report.json/<id>: Not a directory", after the workload was read."""
    taken = tmp_path / "report.json"
    taken.write_text("mine\n")
    for args, message in [
        (
            ["-o", taken],
            f"{taken} is not a folder: -o (or $KVGATE_RUNS) names the folder new runs are made in",
        ),
        (["--run-dir", taken], f"--run-dir {taken} is not a folder: it names the new run's folder"),
    ]:
        result = _run("-w", smoke_workload, *args, "--quiet")
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
        assert result.stderr.startswith(f"kvgate: error: {message}"), result.stderr
    assert taken.read_text() == "mine\n"


def test_resumed_bars_start_from_the_stored_rows(smoke_workload: Path, tmp_path: Path) -> None:
    assert _run("-w", smoke_workload, "-o", tmp_path / "runs", "--quiet").exit_code == 3
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir()]
    result = _run("--resume", run_dir)
    assert result.exit_code == 3
    bars = [line for line in result.stderr.splitlines() if "24/24" in line]
    assert len(bars) == 4
    assert all("cases/s" not in b for b in bars)  # already complete: nothing generated, so no rate
    assert result.stderr.count("0 of 24 cases to generate") == 4


def test_a_terminal_gets_a_bar_and_a_log_gets_lines() -> None:
    import io

    from rich.console import Console

    from kvgate.cli.progress import LineProgress, RichProgress

    screen = io.StringIO()
    with RichProgress(Console(file=screen, force_terminal=True, width=100)) as bar:
        bar.start("full", total=3, done=1)
        bar.advance(2)
        bar.finish()
    assert "full" in screen.getvalue() and "3/3" in screen.getvalue()
    log = io.StringIO()
    with LineProgress(log, every_s=0.0) as lines:
        lines.start("fp8-e4m3", total=3, done=1)
        lines.advance(1)
        lines.advance(1)
        lines.finish()
    text = [line.split(" ", 1)[1] for line in log.getvalue().splitlines()]  # after the UTC time
    assert text[0] == "fp8-e4m3: 2 of 3 cases to generate"
    assert text[1].startswith("fp8-e4m3: at 2/3 cases") and text[-1].startswith("fp8-e4m3: done, 3/3 cases")
    assert ", ETA " in text[1] and "ETA" not in text[-1]
    assert len(text) == 4


@pytest.mark.parametrize(
    ("per_second", "shown"), [(2.5, "2.50 cases/s"), (1.0, "1.00 cases/s"), (0.08, "12.5 s/case")]
)
def test_a_slow_rate_reads_as_seconds_per_case(per_second: float, shown: str) -> None:
    from kvgate.cli.progress import duration, rate_text

    assert rate_text(per_second) == shown
    assert [duration(s) for s in (42, 425, 7380)] == ["42 s", "7 min 05 s", "2 h 03 min"]


def test_stdout_to_stderr_catches_native_writes(capfd: pytest.CaptureFixture[str]) -> None:
    with stdout_to_stderr():
        print("from python")
        os.write(sys.stdout.fileno(), b"from native code\n")
    print("after")
    out, err = capfd.readouterr()
    assert out == "after\n"
    assert "from python" in err and "from native code" in err


def test_every_run_is_new_and_named_when_it_starts(smoke_workload: Path, tmp_path: Path) -> None:
    first = _run("-w", smoke_workload, "-o", tmp_path / "runs")
    second = _run("-w", smoke_workload, "-o", tmp_path / "runs")
    announced = [
        next(line for line in r.stderr.splitlines() if line.startswith("kvgate: run "))
        for r in (first, second)
    ]
    dirs = [Path(line.split()[2]) for line in announced]
    assert dirs[0] != dirs[1] and all((d / "manifest.json").exists() for d in dirs)
    assert sorted(dirs, key=lambda d: d.name) == dirs  # run ids sort by the time they were made
    assert dirs[0].name.split("-")[-1] == dirs[1].name.split("-")[-1]  # the same spec hash
    assert f"kvgate run --resume {dirs[0]}" in announced[0]
    assert "24 of 24 cases to generate" in second.stderr  # measured again, not reused


def test_run_dir_makes_the_run_there_and_never_overwrites_one(smoke_workload: Path, tmp_path: Path) -> None:
    target = tmp_path / "ci" / "gate"
    assert _run("-w", smoke_workload, "--run-dir", target, "--quiet").exit_code == 3
    assert (target / "manifest.json").exists()
    again = _run("-w", smoke_workload, "--run-dir", target)
    assert again.exit_code == 2 and f"continue it with --resume {target}" in again.stderr
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    refused = _run("-w", smoke_workload, "--run-dir", busy)
    assert refused.exit_code == 2 and "is not empty" in refused.stderr
    assert (busy / "notes.txt").read_text() == "mine"
    both = _run("--run-dir", tmp_path / "new", "--resume", target)
    assert both.exit_code == 2 and "give one of them" in both.stderr


def test_engine_model_and_runs_dir_default_from_the_environment(
    smoke_workload: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "from-env"
    monkeypatch.setenv("KVGATE_ENGINE", "fake")
    monkeypatch.setenv("KVGATE_RUNS", str(runs))
    monkeypatch.setenv("KVGATE_MODEL", "smollm2-135m")
    result = CliRunner().invoke(cli, ["run", "-w", str(smoke_workload), "--quiet"])
    assert result.exit_code == 3, result.output
    (run_dir,) = runs.iterdir()
    manifest = (run_dir / "manifest.json").read_text()
    assert '"engine": "fake"' in manifest and '"name": "smollm2-135m"' in manifest
    monkeypatch.setenv("KVGATE_ENGINE", "hf")  # a resumed run keeps its engine whatever the environment
    assert CliRunner().invoke(cli, ["run", "--resume", str(run_dir), "--quiet"]).exit_code == 3
    monkeypatch.setenv("KVGATE_ENGINE", "vlm")
    refused = CliRunner().invoke(cli, ["run", "-w", str(smoke_workload), "--quiet"])
    assert refused.exit_code == 2 and "did you mean 'vllm'?" in refused.output
    monkeypatch.setenv("KVGATE_ENGINE", "fake")
    empty = "is empty: name one, or leave the option out for the default"
    for option in ("--engine", "--model"):  # given empty: refused, never replaced by the environment
        result = CliRunner().invoke(cli, ["run", "-w", str(smoke_workload), option, "", "-o", str(runs)])
        assert (result.exit_code, result.stderr) == (2, f"kvgate: error: {option} {empty}\n"), result.output
    assert len(list(runs.iterdir())) == 1


def test_tau_and_critical_declare_the_runs_policy(smoke_workload: Path, tmp_path: Path) -> None:
    import json

    base = tmp_path / "mine.toml"
    base.write_text(
        '# my policy\nmin_control_passes = 4\nallow_unwinnable = true\n[slice_tau]\n"ctx_bucket=1k" = 0.3\n'
    )
    run_dir = tmp_path / "run"
    args = ["-w", smoke_workload, "--policy", base, "--tau", "0.2", "--critical", "ctx_bucket=512"]
    result = _run(*args, "--run-dir", run_dir, "--quiet")
    assert result.exit_code == 3, result.output
    text = json.loads((run_dir / "manifest.json").read_text())["policy_text"]
    assert text.startswith("# mine.toml with --tau 0.2 --critical ctx_bucket=512\n")
    report = json.loads(CliRunner().invoke(cli, ["report", str(run_dir), "--format", "json"]).stdout)
    policy = report["policy"]
    assert policy["tau"] == 0.2 and policy["critical"] == ["ctx_bucket=512"]
    assert policy["min_control_passes"] == 4 and policy["slice_tau"] == {"ctx_bucket=1k": 0.3}
    refused = _run("--resume", run_dir, "--tau", "0.1")
    assert refused.exit_code == 2 and "a resumed run keeps its own" in refused.output
    typo = _run("-w", smoke_workload, "--critical", "ctx_bucket=5l2", "-o", tmp_path / "r")
    assert typo.exit_code == 2 and "did you mean '512'?" in typo.output
