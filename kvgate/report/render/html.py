"""One self-contained HTML file: verdicts per arm first, then gains, failing examples, tables and plots
(inline SVG), no external assets.

The page is the Jinja2 template `reports/templates/report.html.j2`, autoescaped; this module only
arranges the report JSON's wording (`text`) and plots (`plots`) into the values it reads.
"""

from __future__ import annotations

from typing import Any

from kvgate import shipped
from kvgate.errors import BadInput
from kvgate.report.document.arm import Arm
from kvgate.report.document.findings import Failure
from kvgate.report.document.report import Report
from kvgate.report.render import plots, text

TEMPLATE = "report.html.j2"
FOLDED = 500
"""Failing examples the HTML lists at most, past the first text.EXAMPLES folded away (JSON has all)."""
"""Failing examples shown per arm (the JSON has all)."""
EXAMPLE_WIDTH = 160
OPEN_SLICES = 20
"""Slice tables up to this many rows are shown open; longer ones start folded."""


def _template() -> Any:
    try:
        import jinja2
    except ImportError:
        raise BadInput("the HTML report needs jinja2: pip install 'kvgate[report]'") from None
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(shipped.reports_dir()),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    from markupsafe import Markup

    return env.get_template(TEMPLATE), Markup


def _arm(arm: Arm, markup: Any) -> dict[str, Any]:
    listed = arm.failures[:FOLDED]
    shown = listed[: text.EXAMPLES]
    return {
        "name": arm.arm,
        "title": text.arm_title(arm),
        "decision": arm.decision,
        "exit_code": arm.exit_code,
        "reason": arm.reason,
        "needs": text.holding_back(arm),
        "gains": text.gains_lines(arm),
        "failures_heading": text.examples_heading(arm, len(listed)) if shown else "",
        "examples": [[v for _, v in text.example_fields(f, EXAMPLE_WIDTH)] for f in shown],
        "more_examples": [
            [v for _, v in text.example_fields(f, EXAMPLE_WIDTH)] for f in listed[len(shown) :]
        ],
        "plot": markup(plots.cfr_by_slice(arm)),
        "open": len(arm.slices) <= OPEN_SLICES,
        "slices": [
            {
                "name": s.slice,
                "marks": text.slice_marks(s, arm.lossless),
                "cells": text.slice_cells(s, arm.lossless)[1:-1],
                "decision": s.decision,
            }
            for s in text.shown_slices(arm)
        ],
        "details": text.arm_details(arm),
    }


def render_html(report: Report, **_: Any) -> str:
    template, markup = _template()
    changed = report.policy.changed_reason
    context_plot = plots.cfr_by_context(report)
    divergence_plot = plots.divergence(report)
    compare = None
    if report.compare is not None:
        from kvgate.report.render.compare_text import HEADERS, headline, regression_lines, rows

        compare = {
            "headline": headline(report.compare),
            "headers": HEADERS,
            "rows": rows(report.compare),
        }
        regressions = regression_lines(report.compare)
    else:
        regressions = []
    verdicts = []
    for arm in report.arms:
        verdicts.append(
            {
                "arm": arm.arm,
                "decision": arm.decision,
                "exit_code": arm.exit_code,
                "cfr": text.cfr_summary(text.headline_slice(arm)),
                "reason": arm.reason,
            }
        )
    return str(
        template.render(
            title=f"kvgate {report.decision} · run {report.run.run_id}",
            report=report,
            verdicts=verdicts,
            arms=[_arm(arm, markup) for arm in report.arms],
            example_labels=[label for label, _ in text.example_fields(_EMPTY, 1)],
            meta=[
                text.run_line(report),
                text.policy_line(report),
                text.control_line(report),
                text.noise_line(report),
            ],
            warnings=([f"policy changed after the run: {changed}"] if changed else [])
            + [f"note: {n}" for n in report.notes],
            errors=regressions
            + [f"isolation error, {c.arm}: {c.detail}" for c in report.isolation if not c.ok],
            context_plot=markup(context_plot) if context_plot else None,
            divergence_plot=markup(divergence_plot) if divergence_plot else None,
            slice_headers=text.SLICE_COLUMNS,
            compare=compare,
            legend=text.LEGEND,
        )
    )


_EMPTY = Failure(
    case_id="-",
    labels={},
    expected=None,
    control_output=None,
    candidate_output=None,
    detail=None,
    fail_kind=None,
    first_divergence=None,
)
"""A failing example with nothing in it: its fields' labels head the examples table."""
