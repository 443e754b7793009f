"""Report formats by name, in one table (`kvgate.registry.Registry`): each format's renderer, a function
under report/render imported when the format is first rendered, and the file `--format a,b -o DIR`
writes it to. Reading the table imports no renderer and not the report model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvgate.registry import Registry, load

if TYPE_CHECKING:
    from kvgate.report.document.report import Report


@dataclass(frozen=True)
class ReportFormat:
    file_name: str
    """What the format's file is called in the folder several formats are written into."""
    renderer: str
    """"module:function" taking (report, **options) and returning the text."""


FORMATS: Registry[ReportFormat] = Registry(
    "format",
    records={
        "table": ReportFormat("report.txt", "kvgate.report.render.table:render_table"),
        "md": ReportFormat("report.md", "kvgate.report.render.markdown:render_markdown"),
        "html": ReportFormat("report.html", "kvgate.report.render.html:render_html"),
        "json": ReportFormat("report.json", "kvgate.report.render.formats:render_json"),
        "junit": ReportFormat("junit.xml", "kvgate.report.render.junit:render_junit"),
    },
)


def render_json(report: Report, **_: Any) -> str:
    """The report's JSON: every field it holds, keys sorted, two-space indents (the goldens' form)."""
    return indented_json(report.json_data()) + "\n"


def indented_json(data: Any) -> str:
    """`json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)`, in C: Python's C
    encoder writes it compact (it cannot indent; with an indent Python encodes in Python, ~3× slower on a
    large report) and msgspec's formatter indents it, changing whitespace between tokens only."""
    import msgspec

    compact = json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)
    return msgspec.json.format(compact.encode(), indent=2).decode()


def render(report: Report | dict[str, Any], fmt: str, **options: Any) -> str:
    """`report` (or its parsed JSON) as text in format `fmt` (FORMATS); `options` go to the renderers
    that take them (width: the table's columns; junit_inconclusive: failure | skip)."""
    from kvgate.report.document.report import as_report

    renderer = load(FORMATS[fmt].renderer)  # an unknown format: "did you mean"
    text: str = renderer(as_report(report), **options)
    return text
