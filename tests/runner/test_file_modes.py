"""Files kvgate writes get the mode a plain create would: 0666 less the umask (never a private 0600)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvgate.workload.schema import atomic_write


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_atomic_writes_follow_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        atomic_write(tmp_path / "f", lambda f: f.write(b"x"))
    finally:
        os.umask(old)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o666 & ~umask
