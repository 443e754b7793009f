"""One writer per run directory: an advisory lock on `runs/<run_id>/.lock`.

The kernel drops the lock when its holder dies, even by kill -9, so a crashed run never blocks its
resume; a second live `kvgate run` on the same directory is refused instead of interleaving parts.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kvgate.errors import BadInput

LOCK = ".lock"


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run's lock for the duration of the block; BadInput when another process holds it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BadInput(f"run {run_dir} is in use by another kvgate process") from None
        yield
    finally:
        os.close(fd)
