"""Progress on stderr: one rich bar per pass of each arm, with cases/s and the time left, on a terminal;
elsewhere (CI logs) a line when each pass starts, every minute, and when it ends."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class RateColumn(ProgressColumn):
    """Cases per second over the cases generated in this process (resumed rows excluded)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("—" if speed is None else f"{speed:.1f} cases/s", style="progress.data.speed")


class RichProgress:
    """Implements the runner's Progress; use as a context manager around the run."""

    def __init__(self, console: Console | None = None) -> None:
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            RateColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console or Console(stderr=True),
        )
        self._task: TaskID | None = None
        self._live = False

    def __enter__(self) -> RichProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live:
            self._bar.stop()

    def start(self, label: str, total: int, done: int) -> None:
        if not self._live:  # shown from the first pass on: bad input before it prints only its error
            self._bar.start()
            self._live = True
        self._task = self._bar.add_task(label, total=total, completed=done)

    def advance(self, n: int) -> None:
        if self._task is not None:
            self._bar.advance(self._task, n)

    def finish(self) -> None:
        if self._task is not None:
            self._bar.stop_task(self._task)
        self._task = None


class LineProgress:
    """Implements the runner's Progress as plain lines, for logs that cannot redraw a bar."""

    def __init__(self, out: TextIO | None = None, every_s: float = 60.0) -> None:
        self._out = out or sys.stderr
        self._every_s = every_s
        self._label, self._total, self._done, self._new = "", 0, 0, 0
        self._started = self._last = 0.0

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _line(self, what: str) -> None:
        elapsed = time.monotonic() - self._started
        rate = f", {self._new / elapsed:.2f} cases/s" if self._new and elapsed > 0 else ""
        done = f"{self._done}/{self._total} cases"
        print(f"{self._label}: {what} {done}, {elapsed:.0f} s{rate}", file=self._out)
        self._out.flush()

    def start(self, label: str, total: int, done: int) -> None:
        self._label, self._total, self._done, self._new = label, total, done, 0
        self._started = self._last = time.monotonic()
        print(f"{label}: {total - done} of {total} cases to generate", file=self._out)
        self._out.flush()

    def advance(self, n: int) -> None:
        self._done += n
        self._new += n
        if time.monotonic() - self._last >= self._every_s:
            self._last = time.monotonic()
            self._line("at")

    def finish(self) -> None:
        if self._label:
            self._line("done,")
        self._label = ""


def progress_for_stderr(out: TextIO | None = None) -> RichProgress | LineProgress:
    """A bar on a terminal, lines otherwise."""
    out = out or sys.stderr
    return RichProgress(Console(file=out)) if out.isatty() else LineProgress(out)
