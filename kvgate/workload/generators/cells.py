"""The grid a synthetic generator walks, one case per cell, and the draft every cell ends in.

A cell is a target length and a repeat index, plus a needle depth for the generators that have one.
Cells come lengths outermost, then depths, then index, so each generator draws from its seeded stream
in that order. A cell knows its slices and its identifying params, which every draft carries alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.base import GeneratorParams, Messages, ctx_bucket, depth_bucket


@dataclass(frozen=True)
class Cell:
    """A case's place in a grid without depths."""

    length: int
    index: int

    @property
    def slices(self) -> dict[str, str]:
        return {"ctx_bucket": ctx_bucket(self.length)}

    def params(self, **extra: Any) -> dict[str, Any]:
        """The case's params: the cell's coordinates, then `extra`."""
        return {"length": self.length, "index": self.index, **extra}


@dataclass(frozen=True)
class DepthCell(Cell):
    """A case's place in a grid of lengths × needle depths."""

    depth: float

    @property
    def slices(self) -> dict[str, str]:
        return {"ctx_bucket": ctx_bucket(self.length), "depth_bucket": depth_bucket(self.depth)}

    def params(self, **extra: Any) -> dict[str, Any]:
        return {"length": self.length, "depth": self.depth, "index": self.index, **extra}


def cells(lengths: Sequence[int], per_cell: int) -> list[Cell]:
    return [Cell(length, index) for length in lengths for index in range(per_cell)]


def depth_cells(lengths: Sequence[int], depths: Sequence[float], per_cell: int) -> list[DepthCell]:
    return [
        DepthCell(length, index, depth) for length in lengths for depth in depths for index in range(per_cell)
    ]


def draft(
    cell: Cell,
    p: GeneratorParams,
    *,
    task: str,
    messages: Messages,
    validator: str,
    expected: Any,
    question: str,
    **params: Any,
) -> CaseDraft:
    """The case drafted at `cell`: its slices and coordinates, `p`'s budget and flag, and `params` after
    the coordinates."""
    return CaseDraft(
        task=task,
        messages=messages,
        validator=validator,
        expected=expected,
        max_new_tokens=p.max_new_tokens,
        question=question,
        critical=p.critical,
        slices=cell.slices,
        params=cell.params(**params),
    )
