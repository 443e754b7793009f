"""Renderers by format name; each turns the report JSON into text (the terminal one lives in terminal.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kvgate.errors import BadInput


def render_json(report: dict[str, Any], **_: Any) -> str:
    return json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def _markdown(report: dict[str, Any], **_: Any) -> str:
    from kvgate.report.markdown import render_markdown

    return render_markdown(report)


def _html(report: dict[str, Any], **_: Any) -> str:
    from kvgate.report.html import render_html

    return render_html(report)


def _junit(report: dict[str, Any], junit_inconclusive: str = "failure", **_: Any) -> str:
    from kvgate.report.junit import render_junit

    return render_junit(report, junit_inconclusive)


RENDERERS: dict[str, Callable[..., str]] = {
    "md": _markdown,
    "html": _html,
    "json": render_json,
    "junit": _junit,
}


def render(report: dict[str, Any], fmt: str, **options: Any) -> str:
    """`report` as text in format `fmt` (md, html, json, junit); `options` go to the renderers that take
    them (junit_inconclusive: failure | skip)."""
    if fmt not in RENDERERS:
        raise BadInput(f"unknown report format {fmt!r}; known: {', '.join(RENDERERS)}")
    return RENDERERS[fmt](report, **options)
