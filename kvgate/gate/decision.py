"""Decision names and codes, how an arm's and a run's decisions combine, and the exit code CI branches on.

The procedure that decides each slice and arm is `gate.procedure`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from kvgate.errors import EXIT_ENGINE_ERROR, EXIT_GATE_FAILED, EXIT_INCONCLUSIVE, EXIT_PASS

Decision = Literal["pass", "fail", "inconclusive", "error"]
EXIT_CODES: dict[str, int] = {
    "pass": EXIT_PASS,
    "fail": EXIT_GATE_FAILED,
    "inconclusive": EXIT_INCONCLUSIVE,
    "error": EXIT_ENGINE_ERROR,
}
PASS, FAIL, INCONCLUSIVE = 0, 1, 2
"""Decision codes in arrays (per slice, per arm, per simulated run)."""
NAMES: tuple[Decision, ...] = ("pass", "fail", "inconclusive")


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
