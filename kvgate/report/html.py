"""One self-contained HTML file: the report's tables and its plots (inline SVG), no external assets.

The page skeleton and style live in `reports/report.html` (a `string.Template` with $title and $body);
everything here is escaped text built from the report JSON.
"""

from __future__ import annotations

from html import escape
from string import Template
from typing import Any

from kvgate.paths import REPORTS_DIR
from kvgate.report import plots, text

TEMPLATE = REPORTS_DIR / "report.html"


def badge(decision: str) -> str:
    return f'<span class="badge {escape(decision)}">{escape(decision.upper())}</span>'


def html_table(headers: list[str], rows: list[list[str]], left: set[int]) -> str:
    """Headers are escaped here; cells arrive as HTML already (escape them when building)."""

    def cls(i: int) -> str:
        return ' class="l"' if i in left else ""

    head = "".join(f"<th{cls(i)}>{escape(h)}</th>" for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f"<td{cls(i)}>{c}</td>" for i, c in enumerate(row)) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figure(svg: str | None, caption: str) -> str:
    if svg is None:
        return ""
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def arm_section(arm: dict[str, Any]) -> str:
    headers = list(text.SLICE_COLUMNS)
    rows = []
    for s in arm["slices"]:
        cells = [escape(c) for c in text.slice_cells(s)]
        cells[0] = f"<code>{escape(s['slice'])}</code> {escape(text.slice_marks(s))}".rstrip()
        cells[-1] = badge(s["decision"])
        rows.append(cells)
    details = "".join(f"<li>{escape(line)}</li>" for line in text.arm_details(arm))
    return (
        f'<section id="arm-{escape(arm["arm"])}">'
        f"<h2>{escape(text.arm_title(arm))} {badge(arm['decision'])}</h2>"
        f"<p>{escape(arm['reason'])}</p>"
        + figure(plots.cfr_by_slice(arm), f"{arm['arm']}: CFR and its upper bound against τ, per slice")
        + html_table(headers, rows, left={0})
        + f'<ul class="details">{details}</ul></section>'
    )


def compare_section(compare: dict[str, Any]) -> str:
    from kvgate.report.compare_text import HEADERS, headline, rows

    body = []
    for r in rows(compare):
        cells = [escape(c) for c in r]
        cells[-1] = f'<span class="{escape(r[-1])}">{cells[-1]}</span>'
        body.append(cells)
    return (
        f"<section><h2>Comparison</h2><p>{escape(headline(compare))}</p>"
        + html_table(list(HEADERS), body, left={0, 1, 6, 7})
        + "</section>"
    )


def render_html(report: dict[str, Any]) -> str:
    head = [
        f"<h1>kvgate {badge(report['decision'])} <small>exit {report['exit_code']}</small></h1>",
        f'<p class="meta">{escape(text.run_line(report))}</p>',
        f'<p class="meta">{escape(text.policy_line(report))}</p>',
    ]
    if report["policy"]["changed_reason"]:
        head.append(
            f'<p class="warn">policy changed after the run: {escape(report["policy"]["changed_reason"])}</p>'
        )
    head += [
        f'<p class="meta">{escape(text.control_line(report))}</p>',
        f'<p class="meta">{escape(text.noise_line(report))}</p>',
    ]
    head += [
        f'<p class="bad">isolation error, {escape(c["arm"])}: {escape(c["detail"])}</p>'
        for c in report["isolation"]
        if not c["ok"]
    ]
    head += [f'<p class="warn">note: {escape(n)}</p>' for n in report["notes"]]
    summary = [
        [
            f'<a href="#arm-{escape(a["arm"])}"><code>{escape(a["arm"])}</code></a>',
            escape(a["kind"]),
            badge(a["decision"]),
            escape(a["reason"]),
        ]
        for a in report["arms"]
    ]
    body = [
        *head,
        html_table(["arm", "kind", "decision", "why"], summary, left={0, 1, 2, 3}),
        figure(
            plots.cfr_by_context(report),
            "CFR against context length (median prompt tokens per bucket); dashed: τ",
        ),
        *(arm_section(arm) for arm in report["arms"]),
        "<section><h2>Where outputs first diverge</h2>"
        + (
            figure(
                plots.divergence(report), "first output token where the candidate leaves the control's output"
            )
            or "<p>No candidate output diverged from the control's.</p>"
        )
        + "</section>",
    ]
    if "compare" in report:
        body.append(compare_section(report["compare"]))
    body.append(f"<footer>{escape(text.LEGEND)} · kvgate {escape(report['kvgate_version'])}</footer>")
    title = f"kvgate {report['decision']} · run {report['run']['run_id']}"
    return Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        title=escape(title), body="\n".join(body)
    )
