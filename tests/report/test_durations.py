"""Durations in the terminal report read in one unit per magnitude, so a line comparing two of them
(TTFT and latency against the control) never sets "5018 ms" beside "11.7 s"."""

from __future__ import annotations

import pytest

from kvgate.report.render.text import seconds


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "—"),
        (0.00042, "420 µs"),
        (0.0421, "42.1 ms"),
        (0.5018, "502 ms"),
        (5.018, "5.02 s"),
        (11.7, "11.7 s"),
        (93.74, "93.7 s"),
    ],
)
def test_seconds(value: float | None, text: str) -> None:
    assert seconds(value) == text
