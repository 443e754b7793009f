"""A rich progress bar per arm (cases/s and ETA), written to stderr."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


class RichProgress:
    def __init__(self) -> None:
        self._bar: Progress | None = None
        self._task = None

    def start(self, label: str, total: int) -> None:
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._bar.start()
        self._task = self._bar.add_task(label, total=total, rate="")

    def advance(self, n: int) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, n)
            speed = self._bar.tasks[0].speed
            self._bar.update(self._task, rate=f"{speed:.2f} cases/s" if speed else "")

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        self._bar = None
