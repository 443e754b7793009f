"""Progress on stderr: one rich bar per pass of each arm, with cases/s and the time left."""

from __future__ import annotations

from types import TracebackType

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
