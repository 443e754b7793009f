"""The A/A noise floor and the isolation checks: what identical settings flip, and whether each arm's
cache counters agree with what the arm may do (docs/reference.md, "Isolation")."""

from __future__ import annotations

from typing import Any

import numpy as np

from kvgate.report.analysis.numbers import finite, ratio
from kvgate.report.analysis.run_data import ArmRows, RunRows
from kvgate.report.document.report import IsolationCheck, NoiseFloor
from kvgate.stats.intervals import cp_bounds

REUSING_KINDS = {"reuse"}


def leaf_kinds(spec: dict[str, Any]) -> set[str]:
    """The kinds a treatment spec applies, composites flattened."""
    parts = spec.get("of")
    return {k for p in parts for k in leaf_kinds(p)} if parts else {str(spec["kind"])}


def aa_flips(control: ArmRows, replicate: ArmRows | None) -> np.ndarray:
    """Per case: 1 where the A/A replicate's verdict differs from the control's, 0 where it agrees, −1 n/a."""
    if replicate is None:
        return np.full(control.present.shape, -1, dtype=np.int64)
    usable = control.usable & replicate.usable
    return np.where(usable, (control.passed != replicate.passed).astype(np.int64), -1)


def noise_floor(control: ArmRows, replicate: ArmRows | None, confidence: float) -> NoiseFloor | None:
    """Verdict flips between the control and its replicate, and the A/A analogue of CFR with its bound."""
    if replicate is None:
        return None
    usable = control.usable & replicate.usable
    n = int(usable.sum())
    flips = int((usable & (control.passed != replicate.passed)).sum())
    passes = int((usable & control.passed).sum())
    lost = int(np.count_nonzero(usable & control.passed & ~replicate.passed))
    _, upper = cp_bounds(np.array([lost]), np.array([passes]), confidence)
    return NoiseFloor(
        n_pairs=n,
        flips=flips,
        flip_rate=ratio(flips, n),
        control_passes=passes,
        replicate_failures=lost,
        aa_cfr=ratio(lost, passes),
        aa_cfr_upper=finite(upper[0]),
        token_divergences=int(np.count_nonzero(usable & (replicate.first_divergence >= 0))),
    )


def isolation_checks(rows: RunRows, arms: dict[str, dict[str, Any]]) -> list[IsolationCheck]:
    """No cache hits outside reuse arms; hits on reuse arms (else reuse never happened)."""
    checks = []
    for arm, info in arms.items():
        spec = info["spec"]
        kinds = leaf_kinds(spec)
        hits, n = rows.cache_hits(arm)
        if n == 0:
            continue
        if kinds & REUSING_KINDS:
            ok = hits > 0
            detail = (
                f"{hits} of {n} cases reused cached tokens"
                if ok
                else "a reuse arm reported no cache hits: reuse never happened"
            )
        else:
            ok = hits == 0
            detail = (
                "no cache hits" if ok else f"{hits} cases reported cache hits in an arm that may not reuse"
            )
        checks.append(IsolationCheck(arm=arm, ok=ok, cache_hit_cases=hits, detail=detail))
    return checks
