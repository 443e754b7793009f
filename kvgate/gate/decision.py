"""Gate decisions per slice, per arm and overall, and the exit code CI branches on.

Rule "upper_bound": pass when the one-sided upper confidence bound of CFR is ≤ τ, fail when the lower
bound is > τ (the data show CFR above τ), inconclusive in between. Rule "point": the estimate against τ.
Fewer control passes than `min_control_passes`: inconclusive, never pass.

With `holm = true` a slice fails only when its exact exceedance p-value P(Binomial(n, τ) ≥ k), Holm-
adjusted across the arm's slices, is < 1 − confidence. Unadjusted, that test is exactly "lower bound > τ"
(the Clopper–Pearson bound is the inversion of this test), so the correction only makes "fail" harder.
"Pass" needs no correction: an arm passes only when every gated slice passes (an intersection–union test).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import numpy as np

from kvgate.errors import EXIT_ENGINE_ERROR, EXIT_GATE_FAILED, EXIT_INCONCLUSIVE, EXIT_PASS
from kvgate.gate.policy import Policy
from kvgate.stats.intervals import cp_bounds

Decision = Literal["pass", "fail", "inconclusive", "error"]
EXIT_CODES: dict[str, int] = {
    "pass": EXIT_PASS,
    "fail": EXIT_GATE_FAILED,
    "inconclusive": EXIT_INCONCLUSIVE,
    "error": EXIT_ENGINE_ERROR,
}
PASS, FAIL, INCONCLUSIVE = 0, 1, 2
"""Codes of `decide`'s output (an array per slice or per simulated run)."""
NAMES: tuple[Decision, ...] = ("pass", "fail", "inconclusive")


def decide(
    failures: np.ndarray,
    control_passes: np.ndarray,
    tau: np.ndarray | float,
    policy: Policy,
    fail_pvalues: np.ndarray | None = None,
) -> np.ndarray:
    """Decision codes (PASS, FAIL, INCONCLUSIVE) for arrays of slices or simulated runs.

    `fail_pvalues`: Holm-adjusted exceedance p-values; when given, they decide "fail" instead of the
    lower bound (rule "upper_bound" only).
    """
    k = np.asarray(failures, dtype=np.int64)
    n = np.asarray(control_passes, dtype=np.int64)
    t = np.broadcast_to(np.asarray(tau, dtype=float), k.shape)
    if policy.rule == "point":
        with np.errstate(invalid="ignore", divide="ignore"):
            cfr = k / np.maximum(n, 1)
        passes, fails = cfr <= t, cfr > t
    else:
        lower, upper = cp_bounds(k, n, policy.confidence)
        passes = upper <= t
        fails = lower > t if fail_pvalues is None else np.asarray(fail_pvalues) < policy.alpha
        fails &= ~passes
    codes = np.where(passes, PASS, np.where(fails, FAIL, INCONCLUSIVE))
    return np.where(n < policy.min_control_passes, INCONCLUSIVE, codes)


def reason(code: int, failures: int, control_passes: int, policy: Policy, holm: bool = False) -> str:
    """A short reason for the decision `decide` gave one slice."""
    if control_passes < policy.min_control_passes:
        return f"{control_passes} control passes < min {policy.min_control_passes}"
    if policy.rule == "point":
        return "CFR ≤ τ" if code == PASS else "CFR > τ"
    if code == PASS:
        return "upper bound ≤ τ"
    if code == FAIL:
        return "Holm-adjusted p < α" if holm else "lower bound > τ"
    return "τ inside the confidence interval"


def slice_decision(failures: int, control_passes: int, tau: float, policy: Policy) -> tuple[Decision, str]:
    """The decision for one slice and a short reason."""
    code = int(decide(np.array([failures]), np.array([control_passes]), tau, policy)[0])
    return NAMES[code], reason(code, failures, control_passes, policy)


def combine(decisions: Iterable[str]) -> Decision:
    """Overall outcome: any fail → fail; else any error → error; else any inconclusive; else pass.

    Nothing to combine is an error: a gate that looked at nothing has not passed.
    """
    found = set(decisions)
    if not found:
        return "error"
    for outcome in ("fail", "error", "inconclusive"):
        if outcome in found:
            return outcome
    return "pass"
