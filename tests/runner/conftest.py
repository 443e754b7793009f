"""Fixtures for the runner's tests: a workload big enough to gate on, and the CLI as a function."""

from __future__ import annotations

from pathlib import Path

import helpers.cli
import pytest
from runner_support import DATA, Invoke


@pytest.fixture(scope="session")
def accept_workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """320 passkey cases frozen with the word tokenizer (`kvgate freeze` without --model)."""
    path = tmp_path_factory.mktemp("accept") / "accept.words.parquet"
    result = helpers.cli.kvgate("freeze", DATA / "accept.toml", "-o", path)
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture
def kvgate() -> Invoke:
    """`kvgate ARGS…` in-process; returns click's Result (stdout and stderr apart)."""
    return helpers.cli.kvgate
