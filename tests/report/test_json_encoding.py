"""The report's JSON is written in C (render.formats.indented_json) with the bytes Python's indenting
encoder writes: the goldens and every report stay byte-identical."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvgate.report.analysis.build import build_report
from kvgate.report.render.formats import indented_json, render_json

AWKWARD: dict[str, Any] = {
    "strings": [
        "",
        'quote " and \\\\ backslash',
        "line\nbreak\ttab\x01\x7f",
        "é ü 漢字 \u2028 \u2029",
        "[{,:}]",
    ],
    "empty": {"list": [], "dict": {}, "nested": [[], {}, [[]], {"a": {}}]},
    "numbers": [0, -0.0, 1.5e-07, 9.989159946650525e-05, 1e16, 2**70, -12345, 0.1],
    "literals": [True, False, None],
    "unsorted": {"b": 1, "a": {"d": 2, "c": 3}},
}


def python_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)


def test_indented_json_is_pythons_indenting_encoder() -> None:
    assert indented_json(AWKWARD) == python_json(AWKWARD)


def test_a_report_is_byte_identical(fixed_run: Path) -> None:
    report = build_report(fixed_run)
    assert render_json(report) == python_json(report.json_data()) + "\n"
