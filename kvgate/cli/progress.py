"""Progress on stderr: one rich bar per pass of each arm, with its rate and the time left, on a terminal;
elsewhere (CI logs) a line when each pass starts, every minute, and when it ends, each opening with the
UTC time and giving the pass's rate and, while it runs, its time left. A slow rate (under one case a
second) reads as seconds per case, never "0.0 cases/s"."""

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
        return Text("—" if not speed else rate_text(speed), style="progress.data.speed")


def rate_text(per_second: float) -> str:
    """`2.50 cases/s`, or `12.3 s/case` below one case a second."""
    return f"{per_second:.2f} cases/s" if per_second >= 1 else f"{1 / per_second:.1f} s/case"


def duration(seconds: float) -> str:
    """`42 s`, `7 min 05 s`, `2 h 03 min`."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _stamp() -> str:
    return time.strftime("%H:%M:%SZ", time.gmtime())


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

    def _line(self, what: str, running: bool = False) -> None:
        elapsed = time.monotonic() - self._started
        per_second = self._new / elapsed if self._new and elapsed > 0 else 0.0
        rate = f", {rate_text(per_second)}" if per_second else ""
        left = self._total - self._done
        eta = f", ETA {duration(left / per_second)}" if running and per_second and left > 0 else ""
        done = f"{self._done}/{self._total} cases"
        print(f"{_stamp()} {self._label}: {what} {done}, {duration(elapsed)}{rate}{eta}", file=self._out)
        self._out.flush()

    def start(self, label: str, total: int, done: int) -> None:
        self._label, self._total, self._done, self._new = label, total, done, 0
        self._started = self._last = time.monotonic()
        print(f"{_stamp()} {label}: {total - done} of {total} cases to generate", file=self._out)
        self._out.flush()

    def advance(self, n: int) -> None:
        self._done += n
        self._new += n
        if time.monotonic() - self._last >= self._every_s:
            self._last = time.monotonic()
            self._line("at", running=True)

    def finish(self) -> None:
        if self._label:
            self._line("done,")
        self._label = ""


def progress_for_stderr(out: TextIO | None = None) -> RichProgress | LineProgress:
    """A bar on a terminal, lines otherwise."""
    out = out or sys.stderr
    return RichProgress(Console(file=out)) if out.isatty() else LineProgress(out)
