"""The `[faults]` a matrix plants for the fake engine: their names and the checks made when the matrix
is read (what each fault does is in `kvgate/engines/fake.py`, which honours them)."""

from __future__ import annotations

from typing import Any

from kvgate.errors import BadInput
from kvgate.gate.policy import slice_terms

RATES = ("wrong_answer_rate", "leak_rate", "stale_reuse_rate", "error_rate")
MAX_LATENCY_S = 60.0
FAULT_KEYS = {
    *RATES, "salt_leak", "ignore_treatment", "latency_s", "crash_after", "exit_after", "seed", "only_slice",
    "stale_after_abort", "stale_after_churn",
}  # fmt: skip
SWITCHES = ("salt_leak", "ignore_treatment", "stale_after_abort", "stale_after_churn")


def check_faults(faults: dict[str, Any], where: str) -> None:
    """Unknown faults and ill-typed values are a one-line BadInput naming the key."""
    for key, value in faults.items():
        if key not in FAULT_KEYS:
            raise BadInput(f"{where}: unknown fault {key!r}; known: {', '.join(sorted(FAULT_KEYS))}")
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if key in RATES and not (number and 0 <= value <= 1):
            raise BadInput(f"{where}: {key} must be in [0, 1], got {value!r}")
        if key == "latency_s" and not (number and 0 <= value <= MAX_LATENCY_S):
            raise BadInput(f"{where}: latency_s must be a number in [0, {MAX_LATENCY_S}], got {value!r}")
        if key in ("crash_after", "exit_after", "seed") and not (
            isinstance(value, int) and not isinstance(value, bool)
        ):
            raise BadInput(f"{where}: {key} must be an integer, got {value!r}")
        if key in ("crash_after", "exit_after") and value < 0:
            raise BadInput(f"{where}: {key} must be ≥ 0, got {value}")
        if key in SWITCHES and not isinstance(value, bool):
            raise BadInput(f"{where}: {key} must be true or false, got {value!r}")
        if key == "only_slice":
            if not isinstance(value, str):
                raise BadInput(
                    f"{where}: only_slice must be a slice name such as 'ctx_bucket=4k', got {value!r}"
                )
            try:
                slice_terms(value)
            except BadInput as exc:
                raise BadInput(f"{where}: only_slice: {exc}") from None
