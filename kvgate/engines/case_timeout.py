"""The per-case time limit engines take as `-E timeout_s=SECONDS`: a case that runs longer is stored as
`fail_kind = "timeout"` (a failure of the arm, as a hung request is in production), not an engine error."""

from __future__ import annotations

import math
from typing import Any

from kvgate.errors import BadInput

MAX_TIMEOUT_S = 86_400.0


def check_seconds(engine: str, key: str, value: Any) -> float:
    """Engine option `key` as a number of seconds in (0, MAX_TIMEOUT_S]; a one-line BadInput otherwise."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        raise BadInput(
            f"{engine} engine: {key} must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], got {value!r}"
        )
    return float(value)


def check_timeout(engine: str, value: Any) -> float | None:
    """`value` as a per-case limit in seconds; None for no limit."""
    return None if value is None else check_seconds(engine, "timeout_s", value)
