"""Writing inside a run directory only: no file kvgate writes there follows a link out of it.

A run directory may be copied, edited or planted with links by anyone; kvgate writes its log, its
server records and logs only through paths whose every part below the run directory is a real folder or
file (`check_contained`), and appends to a log opened with O_NOFOLLOW (`open_append`).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from kvgate.errors import BadInput


def check_contained(root: Path, path: Path) -> None:
    """BadInput when any existing part of `path` below `root` (`path` itself included) is a link."""
    try:
        relative = path.relative_to(root)
    except ValueError:
        raise BadInput(f"{path} is outside the run directory {root}") from None
    current = root
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            raise BadInput(
                f"{current} is a link: kvgate writes a run's files only inside its folder; remove the link"
            )


def open_append(root: Path, path: Path) -> int:
    """A write descriptor appending to the regular file `path` inside `root` (created when missing),
    never through a link."""
    check_contained(root, path)
    if path.exists() and not path.is_file():  # a named pipe, a device, a folder (links refused above)
        raise BadInput(f"{path} is not a regular file; remove it")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        fd = os.open(path, flags, 0o666)  # non-blocking: a named pipe is refused, not waited on
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # made a link since the check
            raise BadInput(f"{path} is a link: kvgate writes a run's files only inside its folder") from None
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise BadInput(f"{path} is not a regular file; remove it")
    os.set_blocking(fd, True)
    return fd
