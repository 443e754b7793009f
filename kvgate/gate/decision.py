"""Gate decisions per slice, per arm and overall, and the exit code CI branches on.

Rule "upper_bound": pass when the one-sided upper confidence bound of CFR is ≤ τ, fail when the lower
bound is > τ (the data show CFR above τ), inconclusive in between. Rule "point": the estimate against τ.
Fewer control passes than `min_control_passes`: inconclusive, never pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from kvgate.errors import EXIT_ENGINE_ERROR, EXIT_GATE_FAILED, EXIT_INCONCLUSIVE, EXIT_PASS
from kvgate.gate.policy import Policy
from kvgate.stats.intervals import cp_lower, cp_upper

Decision = Literal["pass", "fail", "inconclusive", "error"]
EXIT_CODES: dict[str, int] = {
    "pass": EXIT_PASS,
    "fail": EXIT_GATE_FAILED,
    "inconclusive": EXIT_INCONCLUSIVE,
    "error": EXIT_ENGINE_ERROR,
}


def slice_decision(failures: int, control_passes: int, tau: float, policy: Policy) -> tuple[Decision, str]:
    """The decision for one slice and a short reason."""
    if control_passes < policy.min_control_passes:
        return "inconclusive", f"{control_passes} control passes < min {policy.min_control_passes}"
    cfr = failures / control_passes
    if policy.rule == "point":
        return ("pass", "CFR ≤ τ") if cfr <= tau else ("fail", "CFR > τ")
    upper = cp_upper(failures, control_passes, policy.confidence)
    lower = cp_lower(failures, control_passes, policy.confidence)
    assert upper is not None and lower is not None
    if upper <= tau:
        return "pass", "upper bound ≤ τ"
    if lower > tau:
        return "fail", "lower bound > τ"
    return "inconclusive", "τ inside the confidence interval"


def combine(decisions: Iterable[str]) -> Decision:
    """Overall outcome: any fail → fail; else any error → error; else any inconclusive; else pass."""
    found = set(decisions)
    for outcome in ("fail", "error", "inconclusive"):
        if outcome in found:
            return outcome  # type: ignore[return-value]
    return "pass"
