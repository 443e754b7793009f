"""After the control's pass: refuse a critical slice whose control passes cannot carry a PASS.

A slice's CFR is measured on the cases the control passes, so a critical slice with fewer control
passes (in distinct clusters) than a zero-failure PASS needs, or fewer than `min_control_passes`, can
only end inconclusive. The check (`gate.feasibility.check_control_winnable`) runs on the control's
stored rows, before any candidate generates; a case the control has not generated yet (a sequential
run's later looks) counts as a pass that may still come.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from kvgate.arrow_build import scalar
from kvgate.gate.feasibility import check_control_winnable
from kvgate.gate.policy import Policy
from kvgate.rundir.store import read_results
from kvgate.runner.case_keys import cluster_key
from kvgate.treatments.matrix import Matrix
from kvgate.workload.case import Case, case_labels


def control_verdicts(run_dir: Path, control: str) -> dict[str, bool]:
    """Case id → whether the control's first pass (replicate 0, attempt 0) passed it, for stored rows."""
    table = read_results(run_dir, ["case_id", "arm", "replicate", "attempt", "passed"])
    zero = scalar(0, pa.int32())  # Arrow scalars: a Python value would import pandas (arrow_build)
    first = pc.and_(
        pc.and_(pc.equal(table["arm"], scalar(control, pa.string())), pc.equal(table["replicate"], zero)),
        pc.equal(table["attempt"], zero),
    )
    rows = table.filter(first)
    return dict(zip(rows["case_id"].to_pylist(), rows["passed"].to_pylist(), strict=True))


def refuse_unwinnable_on_control(
    run_dir: Path, matrix: Matrix, cases: Sequence[Case], policy: Policy
) -> None:
    """BadInput (exit 2) naming the first critical slice the control's passes so far cannot carry; a
    matrix without candidates (a control pass alone) has nothing to refuse."""
    if policy.allow_unwinnable or not matrix.candidates:
        return
    verdicts = control_verdicts(run_dir, matrix.control.name)
    check_control_winnable(
        policy,
        ((case_labels(c), c.critical, cluster_key(c, policy), verdicts.get(c.case_id)) for c in cases),
    )
