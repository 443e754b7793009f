"""The driver's side of the store: rows arriving from workers, stored by one writer in whole parts.

Rows wait per arm and are stored as a part once PART_SECONDS passed since the arm's last part or
MAX_PART_ROWS wait (as the local executor stores them); a row whose key is stored or waiting already is
dropped, so a unit generated again after a lost worker never stores a row twice.
"""

from __future__ import annotations

import time
from typing import Any

from kvgate.rundir.store import RowKey
from kvgate.runner.context import RunContext
from kvgate.runner.run import MAX_PART_ROWS, PART_SECONDS, store_rows


def row_key(row: dict[str, Any]) -> RowKey:
    return (row["arm"], row["replicate"], row["case_id"], row["attempt"])


class RowSink:
    """Rows received and not stored yet, by arm; `ctx.done` holds the keys stored."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.pending: dict[str, list[dict[str, Any]]] = {}
        self.waiting: set[RowKey] = set()
        self.stored_at: dict[str, float] = {}

    def have(self) -> set[RowKey]:
        """Keys stored or waiting to be."""
        return self.ctx.done | self.waiting

    def add(self, arm: str, rows: list[dict[str, Any]]) -> int:
        """Take `rows` of `arm` (those not had yet); returns how many were new."""
        fresh = [r for r in rows if row_key(r) not in self.ctx.done and row_key(r) not in self.waiting]
        if fresh:
            self.pending.setdefault(arm, []).extend(fresh)
            self.waiting.update(map(row_key, fresh))
            self.stored_at.setdefault(arm, time.monotonic())
        self.flush_due()
        return len(fresh)

    def flush_due(self) -> None:
        now = time.monotonic()
        for arm, rows in list(self.pending.items()):
            if rows and (now - self.stored_at[arm] >= PART_SECONDS or len(rows) >= MAX_PART_ROWS):
                self.flush(arm)

    def flush(self, arm: str) -> None:
        rows, self.pending[arm] = self.pending.get(arm, []), []
        self.stored_at[arm] = time.monotonic()
        if rows:
            store_rows(self.ctx, arm, rows)
            self.waiting.difference_update(map(row_key, rows))

    def flush_all(self) -> None:
        for arm in list(self.pending):
            self.flush(arm)
