"""Exit codes CI can trust: a bug is 70 with its traceback in a file, Ctrl-C is 130 and names the run to
resume, and a closed stdout leaves the gate's code alone."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import kvgate.shipped
from kvgate.cli import cli
from kvgate.errors import EXIT_INTERNAL, EXIT_INTERRUPTED

REPO = Path(__file__).resolve().parents[2]
KVGATE = [sys.executable, "-c", "from kvgate.cli import main; main()"]
CODES = ("0 pass", "1 gate failed", "2 bad input", "3 inconclusive", "4 engine error")


def test_help_and_readme_list_every_exit_code() -> None:
    shown = " ".join(CliRunner().invoke(cli, ["--help"]).output.split())
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    for text in (shown, readme):
        assert all(code in text for code in CODES), text
        assert f"{EXIT_INTERNAL} internal error" in text and f"{EXIT_INTERRUPTED} interrupted" in text


def test_a_bug_is_one_line_naming_the_saved_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> Path:
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(kvgate.shipped, "suites_dir", broken)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = CliRunner().invoke(cli, ["suites"])
    assert result.exit_code == EXIT_INTERNAL
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert result.stderr.startswith(
        "kvgate: internal error (a bug in kvgate, exit 70): ZeroDivisionError: planted"
    )
    (saved,) = tmp_path.glob("kvgate-crash-*.txt")
    assert result.stderr.rstrip().endswith(f"traceback saved in {saved}")
    trace = saved.read_text()
    assert "Traceback (most recent call last)" in trace and "in broken" in trace


def test_ctrl_c_exits_130_naming_the_run_directory(smoke_workload: Path, tmp_path: Path) -> None:
    matrix = tmp_path / "slow.toml"
    matrix.write_text(
        '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\n[faults."*"]\nlatency_s = 0.1\n'
    )
    runs = tmp_path / "runs"
    argv = [*KVGATE, "run", "--engine", "fake", "-w", smoke_workload, "-m", matrix, "-o", runs, "--quiet"]
    proc = subprocess.Popen(
        list(map(str, argv)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell's background job (`make test &`) ignores SIGINT, and children inherit that; Ctrl-C
        # reaches a terminal's foreground job with the default action, which is what this test means.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 30
    while not list(runs.glob("*/manifest.json")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    (manifest,) = runs.glob("*/manifest.json")
    time.sleep(0.3)  # a few cases in
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == EXIT_INTERRUPTED, err
    run_dir = manifest.parent
    assert err.strip().splitlines()[-1] == (
        f"kvgate: interrupted; the rows stored in {run_dir} are kept: continue with --resume {run_dir}"
    )
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, smoke_workload: Path) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    result = CliRunner().invoke(cli, ["run", "--engine", "fake", "-w", str(smoke_workload), "-o", str(runs)])
    assert result.exit_code == 3, result.output  # the smoke suite is inconclusive by design
    (manifest,) = runs.glob("*/manifest.json")
    return manifest.parent


@pytest.mark.parametrize(("fmt", "lines_read"), [("table", 0), ("md", 1), ("html", 1)])
def test_a_closed_stdout_keeps_the_gates_code(finished: Path, fmt: str, lines_read: int) -> None:
    argv = [*KVGATE, "report", str(finished), "--format", fmt]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    for _ in range(lines_read):
        assert proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 3, err
    assert err == ""
