"""Engine output to a file in the run directory, so kvgate's own lines stay readable.

Engines and the libraries under them (vLLM, transformers, torch, Ray) write warnings, progress bars
and native log lines to stderr: vLLM prints a dozen lines before its first token on this CPU. During
`kvgate run`, file descriptor 2 is pointed at a log file, so everything written there (by Python or by
native code) lands in `<run_dir>/engine.log`; kvgate's own lines (the run directory, progress) go to
`terminal`, a stream on the original stderr. Until the run directory exists (an engine starts before
its fingerprint can name the run) the output is held in a temp file, then moved into the run's log.
A run whose engine fails before the run has a directory keeps the temp file and names it; bad input
(exit 2, one line) removes it.

Where stderr is not a real file descriptor (a test harness capturing it), nothing is redirected.
`--verbose` redirects nothing either: the engine's output shows as it is written.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import click

from kvgate.contained import open_append
from kvgate.errors import BadInput

ENGINE_LOG = "engine.log"


class EngineLog:
    """Where engine output goes; `attach(run_dir)` moves it into the run directory's `engine.log`."""

    def __init__(self, terminal: TextIO, held: Path | None) -> None:
        self.terminal = terminal
        self.held = held
        self.path: Path | None = None

    def attach(self, run_dir: Path) -> None:
        """From now on, engine output appends to `<run_dir>/engine.log` (the held output first)."""
        if self.held is None or self.path is not None:
            return
        target = run_dir / ENGINE_LOG
        sys.stderr.flush()
        with os.fdopen(open_append(run_dir, target), "ab") as log:  # never through a planted link
            with self.held.open("rb") as held:
                shutil.copyfileobj(held, log)
            log.flush()
            os.dup2(log.fileno(), 2)
        self.held.unlink(missing_ok=True)
        self.path = target


@contextlib.contextmanager
def engine_output_to_log(verbose: bool) -> Iterator[EngineLog]:
    """For the block, engine output goes to a log file (see the module's docstring)."""
    try:
        redirect = not verbose and sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):
        redirect = False
    if not redirect:
        yield EngineLog(sys.stderr, None)
        return
    sys.stderr.flush()
    saved = os.dup(2)
    terminal = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="replace")
    fd, name = tempfile.mkstemp(prefix="kvgate-engine-", suffix=".log")
    os.dup2(fd, 2)
    os.close(fd)
    log = EngineLog(terminal, Path(name))
    failed = False
    try:
        yield log
    except BadInput:
        raise
    except BaseException:
        failed = True
        raise
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        terminal.close()
        if log.path is None and log.held is not None:
            if failed and log.held.stat().st_size > 0:
                click.echo(f"kvgate: the engine's output is in {log.held}", err=True)
            else:
                log.held.unlink(missing_ok=True)
