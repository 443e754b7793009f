"""Coverage replay: the certificate's bound against the true attention-output error, cell by cell.

A cell is (case, layer, query head, decoding step). The arm runs as usual, but its certificate keeps the
whole dropped set too, so each cell's true error — the distance between the head's attention output over
the retained entries and over the retained plus the dropped ones (the full cache), for the same query —
is computed beside the estimate and the bound (`estimator.exact_error`). Coverage is the share of cells
whose true error is at most the bound (plus `TOLERANCE`, the float32 rounding of the model's attention).
With `draws` > 1 every cell is also bounded by that many independent samples: the share of them that
cover it estimates the cell's own chance of being covered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kvgate.engines.base import ArmSetup
from kvgate.engines.hf.certificate.observer import TOLERANCE, Cells
from kvgate.treatments.spec import Treatment
from kvgate.workload.case import Case

__all__ = ["TOLERANCE", "CaseCells", "case_cells", "replay"]


@dataclass(frozen=True)
class CaseCells:
    """One case's cells, flattened over (step, layer, batch, key head, group), each tensor [cells]: the
    true error, the estimate, the noise-corrected estimate, the bound, ‖o_R‖, whether the cap binds, and
    each cell's step, layer and key head (to cluster cells that share a sample: one per layer and head);
    covering_draws: of `draws` independent samples (the first the arm's own), how many cover the cell."""

    case_id: str
    true: torch.Tensor
    estimate: torch.Tensor
    bound: torch.Tensor
    corrected: torch.Tensor
    output_norm: torch.Tensor
    capped: torch.Tensor
    step: torch.Tensor
    layer: torch.Tensor
    kv_head: torch.Tensor
    covering_draws: torch.Tensor
    draws: int

    @property
    def covered(self) -> int:
        return int((self.true <= self.bound.double() + TOLERANCE).sum())


def replay(engine: Any, treatment: Treatment, cases: Sequence[Case], draws: int = 1) -> list[CaseCells]:
    """Run `cases` under `treatment` (an eviction with `certificate = true`) on the hf `engine` in replay
    mode, each cell bounded by `draws` samples; cases with no certified step (the first token ended the
    output) give no cells."""
    session = engine.open(ArmSetup(treatment.name, 0, treatment, f"replay:{treatment.name}"))
    session.replay = True
    session.replay_draws = draws
    out = []
    try:
        for case in cases:
            generation = session.generate([case])[0]
            if generation.error is not None:
                raise RuntimeError(f"{case.case_id}: {generation.error}")
            cells = session.last_certificate.cells if session.last_certificate else None
            if cells is None or not cells.true:
                continue
            out.append(case_cells(case.case_id, cells, draws))
    finally:
        session.close()
    return out


def case_cells(case_id: str, cells: Cells, draws: int) -> CaseCells:
    """The replay records of one case ([B, Hkv, G] per (step, layer)) flattened, with each cell's indices."""
    true = torch.stack(cells.true)  # [S·L, B, Hkv, G]
    shape = true.shape

    def index(values: torch.Tensor, dim: int) -> torch.Tensor:
        view = [1] * len(shape)
        view[dim] = -1
        return values.view(view).expand(shape).flatten()

    return CaseCells(
        case_id,
        true.flatten(),
        torch.stack(cells.estimate).flatten(),
        torch.stack(cells.bound).flatten(),
        torch.stack(cells.corrected).flatten(),
        torch.stack(cells.output_norm).flatten(),
        torch.stack(cells.capped).flatten(),
        step=index(torch.tensor(cells.step), 0),
        layer=index(torch.tensor(cells.layer), 0),
        kv_head=index(torch.arange(shape[2]), 2),
        covering_draws=torch.stack(cells.covering_draws).flatten(),
        draws=draws,
    )
