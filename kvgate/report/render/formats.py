"""Renderers by format name, each turning the report model (report.document) into text: table,
md, html, json, junit (one module each under report/render; json's is here)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kvgate.errors import BadInput
from kvgate.report.document.report import Report, as_report


def render_json(report: Report, **_: Any) -> str:
    """The report's JSON: every field it holds, keys sorted, two-space indents (the goldens' form)."""
    data = report.json_data()
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def _markdown(report: Report, **_: Any) -> str:
    from kvgate.report.render.markdown import render_markdown

    return render_markdown(report)


def _html(report: Report, **_: Any) -> str:
    from kvgate.report.render.html import render_html

    return render_html(report)


def _junit(report: Report, junit_inconclusive: str = "failure", **_: Any) -> str:
    from kvgate.report.render.junit import render_junit

    return render_junit(report, junit_inconclusive)


def _table(report: Report, width: int = 120, **_: Any) -> str:
    from kvgate.report.render.table import render_table

    return render_table(report, width)


RENDERERS: dict[str, Callable[..., str]] = {
    "table": _table,
    "md": _markdown,
    "html": _html,
    "json": render_json,
    "junit": _junit,
}


def render(report: Report | dict[str, Any], fmt: str, **options: Any) -> str:
    """`report` (or its parsed JSON) as text in format `fmt` (table, md, html, json, junit); `options` go
    to the renderers that take them (width: the table's columns; junit_inconclusive: failure | skip)."""
    if fmt not in RENDERERS:
        raise BadInput(f"unknown report format {fmt!r}; known: {', '.join(RENDERERS)}")
    return RENDERERS[fmt](as_report(report), **options)
