"""Helpers of the fuzz tests: the CLI in-process, the shape of a refusal, and what a folder holds."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from click.testing import Result
from hypothesis import HealthCheck, settings

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
"""150 examples a test (1,050 in all), reproducible in CI (derandomized, no example database), no
per-example deadline."""


def assert_refused(result: Result, what: object) -> None:
    """Exit 2, one line on stderr naming an error, nothing on stdout, no traceback."""
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, f"{what}: {type(result.exception).__name__}: {result.exception}"
    assert result.exit_code == 2, f"{what}: exit {result.exit_code}: {result.output[-300:]}"
    assert result.stderr.startswith("kvgate: error: "), f"{what}: {result.stderr[:300]}"
    assert result.stderr.count("\n") == 1, f"{what}: {result.stderr[:300]}"
    assert result.stdout == "", f"{what}: {result.stdout[:300]}"


def fresh(root: Path) -> Path:
    """A new empty folder under `root`: each generated example gets its own."""
    return Path(tempfile.mkdtemp(dir=root))


def tree(root: Path) -> set[str]:
    """Every path under `root` (relative), folders included."""
    found = set()
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            found.add(os.path.relpath(os.path.join(folder, name), root))
    return found
