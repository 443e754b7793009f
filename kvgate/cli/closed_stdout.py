"""A closed stdout (`kvgate report RUN | head -1`) is not an error: what was not written is dropped and
the command exits with its own code."""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def tolerating_closed_stdout() -> Iterator[None]:
    """Write to stdout in the block; if its reader has gone, drop the rest and carry on."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()


def silence_stdout() -> None:
    """Point stdout at the null device, so that later writes and the final flush succeed."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (AttributeError, OSError, ValueError):
        pass  # not a file descriptor (captured output): nothing is flushed to a closed pipe at exit


def stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll reports an error on it)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def stdout_console(width: int | None = None) -> Any:
    """A rich Console on stdout that drops its output once stdout is closed (rich's own exits 1)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            silence_stdout()

    return _Console(width=width)
