"""JSON-safe numbers: a NaN (no evidence) becomes null, never 0.0 and never an invalid JSON token."""

from __future__ import annotations

import math
from typing import Any


def finite(value: Any) -> float | None:
    """`value` as a float, or None when it is None or NaN."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def ratio(num: int, den: int) -> float | None:
    """num / den, or None for an empty denominator."""
    return num / den if den else None
