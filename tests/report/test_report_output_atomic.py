"""`kvgate report -o FILE` writes the whole report or nothing: a write that fails (a full disk) leaves the
previous file as it was, says so in one line and exits 2."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvgate.cli import cli


@pytest.mark.parametrize("fmt", ["table", "md", "json"])
def test_a_failed_write_keeps_the_previous_report(
    fixed_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    out = tmp_path / f"report.{fmt}"
    first = CliRunner().invoke(cli, ["report", str(fixed_run), "--format", fmt, "-o", str(out)])
    assert first.exit_code == 1, first.output
    before = out.read_bytes()
    assert len(before) > 1000

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    failed = CliRunner().invoke(cli, ["report", str(fixed_run), "--format", fmt, "-o", str(out)])
    assert failed.exit_code == 2
    assert f"cannot write {out}: No space left on device" in failed.output
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # no temp file left behind
