"""Engine output goes to `<run_dir>/engine.log` during `kvgate run`; kvgate's own lines stay on stderr.

Each case runs in a subprocess: the redirect acts on file descriptor 2, which a test harness captures
differently."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import logging, os, sys, warnings
from pathlib import Path
from kvgate.cli.engine_log import engine_output_to_log
from kvgate.errors import BadInput, EngineFailure
run, verbose, fail = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
with engine_output_to_log(verbose) as log:
    print("python-before", file=sys.stderr)
    os.write(2, b"native-before\\n")
    if fail == "engine":
        raise EngineFailure("the engine died")
    if fail == "input":
        raise BadInput("a bad name")
    held = log.held
    log.attach(run)
    print(f"held-gone={held is None or not held.exists()}", file=log.terminal)
    warnings.warn("library-warning")
    logging.getLogger("somelib").warning("logged-warning")
    os.write(2, b"native-after\\n")
    print("kvgate-line", file=log.terminal)
print("after-the-run", file=sys.stderr)
"""
ENGINE_LINES = ("python-before", "native-before", "library-warning", "logged-warning", "native-after")


def _script(run: Path, verbose: bool, fail: str = "") -> subprocess.CompletedProcess[str]:
    run.mkdir(exist_ok=True)
    argv = [sys.executable, "-c", SCRIPT, str(run), str(int(verbose)), fail]
    temp = run.parent / "temp"  # where the output is held until the run directory exists
    temp.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(temp)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


def test_engine_output_lands_in_the_run_directory_in_order(tmp_path: Path) -> None:
    done = _script(tmp_path / "run", verbose=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["held-gone=True", "kvgate-line", "after-the-run"]
    assert not list((tmp_path / "temp").iterdir())
    log = (tmp_path / "run" / "engine.log").read_text()
    positions = [log.index(line) for line in ENGINE_LINES]
    assert positions == sorted(positions)  # what came before the run directory existed, first


def test_verbose_shows_the_engine_output_and_keeps_no_log(tmp_path: Path) -> None:
    done = _script(tmp_path / "run", verbose=True)
    assert done.returncode == 0
    assert all(line in done.stderr for line in ENGINE_LINES) and "kvgate-line" in done.stderr
    assert not (tmp_path / "run" / "engine.log").exists()


def test_an_engine_failure_before_the_run_directory_names_the_held_output(tmp_path: Path) -> None:
    done = _script(tmp_path / "run", verbose=False, fail="engine")
    assert done.returncode == 1 and "EngineFailure: the engine died" in done.stderr  # an uncaught raise
    line = next(line for line in done.stderr.splitlines() if line.startswith("kvgate: the engine's output"))
    held = Path(line.removeprefix("kvgate: the engine's output is in "))
    assert held.read_text() == "python-before\nnative-before\n"
    held.unlink()


def test_bad_input_drops_the_held_output(tmp_path: Path) -> None:
    done = _script(tmp_path / "run", verbose=False, fail="input")
    assert "BadInput: a bad name" in done.stderr and "engine's output" not in done.stderr
    assert not list((tmp_path / "temp").iterdir())


def test_kvgate_run_keeps_an_engine_log(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "from kvgate.cli import main; main()", "run", "--engine", "fake"]
    done = subprocess.run(
        [*argv, "--run-dir", str(tmp_path / "r")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 3, done.stderr
    notice, announced = done.stderr.splitlines()[:2]
    assert notice.startswith("kvgate: no -w given: gating the default suite 'smoke'")
    assert announced.startswith(f"kvgate: run {tmp_path / 'r'} (after an interruption: kvgate run --resume")
    assert (tmp_path / "r" / "engine.log").is_file()
