"""Renderers by format name; each turns the report model (report.document) into text (the terminal one
lives in terminal.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kvgate.errors import BadInput
from kvgate.report.document.report import Report


def render_json(report: Report, **_: Any) -> str:
    """The report's JSON: every field it holds, keys sorted, two-space indents (the goldens' form)."""
    data = report.json_data()
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def _markdown(report: Report, **_: Any) -> str:
    from kvgate.report.markdown import render_markdown

    return render_markdown(report)


def _html(report: Report, **_: Any) -> str:
    from kvgate.report.html import render_html

    return render_html(report)


def _junit(report: Report, junit_inconclusive: str = "failure", **_: Any) -> str:
    from kvgate.report.junit import render_junit

    return render_junit(report, junit_inconclusive)


RENDERERS: dict[str, Callable[..., str]] = {
    "md": _markdown,
    "html": _html,
    "json": render_json,
    "junit": _junit,
}


def as_report(report: Report | dict[str, Any]) -> Report:
    """`report`, or a report's parsed JSON read into its model (ValidationError when it does not fit)."""
    return report if isinstance(report, Report) else Report.model_validate(report)


def render(report: Report | dict[str, Any], fmt: str, **options: Any) -> str:
    """`report` (or its parsed JSON) as text in format `fmt` (md, html, json, junit); `options` go to the
    renderers that take them (junit_inconclusive: failure | skip)."""
    if fmt not in RENDERERS:
        raise BadInput(f"unknown report format {fmt!r}; known: {', '.join(RENDERERS)}")
    return RENDERERS[fmt](as_report(report), **options)
