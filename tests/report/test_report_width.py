"""A table written to a pipe or a file follows COLUMNS (else 120 columns) and ends no line in spaces."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kvgate.cli import cli


@pytest.mark.parametrize(("columns", "width"), [("80", 80), ("100", 100), ("", 120), ("wide", 120)])
def test_piped_table_follows_columns(fixed_run: Path, columns: str, width: int) -> None:
    result = CliRunner().invoke(cli, ["report", str(fixed_run)], env={"COLUMNS": columns})
    lines = result.stdout.splitlines()
    assert result.exit_code == 1 and len(lines) > 50
    assert max(len(line) for line in lines) <= width
    assert not [line for line in lines if line != line.rstrip()]
    assert max(len(line) for line in lines) > width - 10  # the width is used, not a narrower one
