"""The per-case time limit engines take as `-E timeout_s=SECONDS`: a case that runs longer is stored as
`fail_kind = "timeout"` (a failure of the arm, as a hung request is in production), not an engine error."""

from __future__ import annotations

import math
from typing import Any

from kvgate.errors import BadInput

MAX_TIMEOUT_S = 86_400.0


def check_timeout(engine: str, value: Any) -> float | None:
    """`value` as a limit in seconds, in (0, MAX_TIMEOUT_S]; None for no limit."""
    if value is None:
        return None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        raise BadInput(
            f"{engine} engine: timeout_s must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], got {value!r}"
        )
    return float(value)
