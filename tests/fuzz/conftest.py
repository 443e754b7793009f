"""Fixtures of the fuzz tests: a small frozen workload and a finished run of it on the fake engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import kvgate

MATRIX = """[matrix]
control = "full"
candidates = ["fp8-e4m3"]
[faults.fp8-e4m3]
wrong_answer_rate = 0.3
"""


@pytest.fixture(scope="session")
def finished_run(smoke_workload: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the smoke workload whose fp8 arm fails (exit 1)."""
    root = tmp_path_factory.mktemp("fuzz-run")
    (root / "m.toml").write_text(MATRIX)
    args = ["--engine", "fake", "-w", smoke_workload, "-m", root / "m.toml", "-o", root, "--quiet"]
    result = kvgate("run", *args)
    assert result.exit_code == 1, result.output
    return next(p for p in root.iterdir() if (p / "manifest.json").exists())
