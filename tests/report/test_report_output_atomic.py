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


def test_a_pipe_or_device_is_written_into_never_replaced(fixed_run: Path, tmp_path: Path) -> None:
    """`-o /dev/null` once put a plain file where the device was (a rename over it); a named pipe stands
    for every such target here: written into, still a pipe after, and one with no reader is refused."""
    import stat
    import threading
    import time

    pipe = tmp_path / "report.fifo"
    os.mkfifo(pipe)
    lonely = CliRunner().invoke(cli, ["report", str(fixed_run), "--format", "json", "-o", str(pipe)])
    assert lonely.exit_code == 2 and "a pipe nothing reads from" in lonely.output
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)  # the reader's end, open before the writer comes
    os.set_blocking(fd, True)
    received = bytearray()

    def drain() -> None:
        while True:
            chunk = os.read(fd, 65536)
            if chunk:
                received.extend(chunk)
            elif received:  # the writer has closed its end
                return
            else:  # no writer yet
                time.sleep(0.01)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        written = CliRunner().invoke(cli, ["report", str(fixed_run), "--format", "json", "-o", str(pipe)])
        reader.join(timeout=60)
    finally:
        os.close(fd)
    assert written.exit_code == 1, written.output
    assert stat.S_ISFIFO(os.stat(pipe).st_mode) and bytes(received).startswith(b"{")
    assert sorted(p.name for p in tmp_path.iterdir()) == [pipe.name]  # no temp file beside it
