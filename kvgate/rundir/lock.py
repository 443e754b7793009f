"""One writer per run directory: an advisory lock on `runs/<run_id>/.lock`.

The kernel drops the lock when its holder dies, even by kill -9, so a crashed run never blocks its
resume; a second live `kvgate run` on the same directory is refused instead of interleaving parts.
The lock file is never followed through a link: a `.lock` that is a link, a folder or anything but a
regular file is a one-line error.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kvgate.errors import BadInput

LOCK = ".lock"


def _open(path: Path, flags: int) -> int:
    """The lock file, opened without following a link; anything but a regular file is a BadInput."""
    not_a_lock = f"{path} is not a lock file (a link, a folder or a device)"
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise BadInput(not_a_lock) from None
        raise BadInput(f"cannot open {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise BadInput(not_a_lock)
    return fd


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run's lock for the duration of the block; BadInput when another process holds it."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"cannot create run directory {run_dir}: {exc.strerror or exc}") from None
    fd = _open(run_dir / LOCK, os.O_RDWR | os.O_CREAT)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BadInput(f"run {run_dir} is in use by another kvgate process") from None
        yield
    finally:
        os.close(fd)


def lock_held(run_dir: Path) -> bool:
    """Whether a writer holds the run's lock now (False when there is no lock file)."""
    path = run_dir / LOCK
    if not os.path.lexists(path):
        return False
    fd = _open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
