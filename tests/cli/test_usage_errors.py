"""Click's own usage errors (an unknown option or command, a missing argument, a value outside a choice or
range) read as every other bad input: one "kvgate: error:" line naming the command's help, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import kvgate

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--bogus"], "no such option '--bogus'. Did you mean '--verbose'? (see 'cli run --help')"),
        (["report"], "missing argument 'RUN_DIR' (see 'cli report --help')"),
        (["run", "-w"], "option '-w' requires an argument (see 'cli run --help')"),
        (
            ["report", "x", "--junit-inconclusive", "maybe"],
            "invalid value for '--junit-inconclusive': 'maybe' is not one of 'failure', 'skip' "
            "(see 'cli report --help')",
        ),
        (
            ["run", "--tau", "2"],
            "invalid value for '--tau': 2.0 is not in the range 0<=x<=1 (see 'cli run --help')",
        ),
        (["run", "-E", "foo"], "invalid value for -E: expected key=value, got 'foo' (see 'cli run --help')"),
        (["runs", "a", "b"], "got unexpected extra argument (b) (see 'cli runs --help')"),
        (["--bogus"], "no such option '--bogus' (see 'cli --help')"),
        (["frobnicate"], "unknown command 'frobnicate'; known: engines, freeze, init"),
    ],
)
def test_usage_error_is_one_kvgate_line(args: list[str], message: str) -> None:
    result = kvgate(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"kvgate: error: {message}")
    assert len(result.stderr.splitlines()) == 1
    assert "Usage:" not in result.stderr and "Try '" not in result.stderr


def test_bare_group_still_prints_its_help() -> None:
    result = kvgate()
    assert result.exit_code == 2
    assert "Commands:" in result.output and "kvgate: error" not in result.output


def test_console_entry_point_names_its_own_program() -> None:
    """As a user runs it: the help to see is `python -m kvgate run --help`."""
    done = subprocess.run(
        [sys.executable, "-m", "kvgate", "run", "--bogus"],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "kvgate: error: no such option '--bogus'. Did you mean '--verbose'? "
        "(see 'python -m kvgate run --help')\n"
    )
