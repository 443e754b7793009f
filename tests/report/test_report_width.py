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


def test_the_compare_table_at_80_columns_keeps_slice_and_change_first_and_cuts_no_figure(
    fixed_run: Path, tmp_path: Path
) -> None:
    import re

    from helpers.report_fixed_run import make_fixed_run

    worse = make_fixed_run(tmp_path / "worse", fails={"offload-host": {10, 47}, "fp8-e4m3": {20, 46}})
    result = CliRunner().invoke(
        cli, ["report", str(worse), "--compare", str(fixed_run)], env={"COLUMNS": "80"}
    )
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    headers = [line.split() for line in lines if line.strip().startswith("slice ") and "change" in line]
    assert headers and all(h[:2] == ["slice", "change"] for h in headers)
    counts = re.findall(
        r"\d+/\d+ → \d+/\d+|\d+/\d+", result.stdout[result.stdout.rindex("compared with run") :]
    )
    assert counts and all(re.fullmatch(r"\d+/\d+( → \d+/\d+)?", c) for c in counts)
    assert "→ 20/1 " not in result.stdout and "not shown at this width" in result.stdout
