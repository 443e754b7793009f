"""The terminal report: one verdict line per arm first, then per arm a table fitted to the console's
width (slice and decision always shown, minor columns left out when narrow), what held an inconclusive
arm back, failing examples and gains; decisions in colour."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kvgate.report import text
from kvgate.report.document.arm import Arm
from kvgate.report.document.report import Report

COLOURS = {"pass": "green", "fail": "bold red", "inconclusive": "yellow", "error": "bold magenta"}
PRIORITY = (0, 10, 1, 2, 3, 4, 9, 7, 8, 5, 6)
"""SLICE_COLUMNS by importance: slice and decision always, then counts, CFR, bound, τ, adjusted p…"""
"""Failing examples shown per arm (the JSON has all)."""


def decision_text(decision: str) -> Text:
    return Text(decision.upper(), style=COLOURS.get(decision, ""))


def _table(arm: Arm, columns: list[int]) -> Table:
    table = Table(
        title=text.arm_title(arm),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        title_style="bold",
        pad_edge=False,
        collapse_padding=True,
    )
    last = len(text.SLICE_COLUMNS) - 1
    for i in columns:
        header = text.SLICE_COLUMNS[i]
        if i == 0:
            table.add_column(header, overflow="fold")
        else:
            table.add_column(header, justify="left" if i == last else "right", no_wrap=True)
    for s in text.shown_slices(arm):
        cells: list[Any] = text.slice_cells(s, arm.lossless)
        cells[-1] = decision_text(s.decision)
        table.add_row(*(cells[i] for i in columns))
    return table


def fitted_columns(arm: Arm, width: int) -> list[int]:
    """The SLICE_COLUMNS that fit in `width` cells, most important first, in table order.

    A table's width is its columns' widest cells plus two cells between columns and two at the edges."""
    rows = [text.slice_cells(s, arm.lossless) for s in text.shown_slices(arm)]
    widths = [max(cell_len(h), *(cell_len(r[i]) for r in rows)) for i, h in enumerate(text.SLICE_COLUMNS)]
    chosen = [0, len(text.SLICE_COLUMNS) - 1]
    used = widths[0] + widths[-1] + 2 + 2
    for i in PRIORITY[2:]:
        if used + widths[i] + 2 > width:
            break
        chosen.append(i)
        used += widths[i] + 2
    return sorted(chosen)


def arm_table(arm: Arm, console: Console) -> tuple[Table, list[str]]:
    """The arm's slice table fitted to `console`, and the headers of the columns left out."""
    columns = fitted_columns(arm, console.width)
    left_out = [h for i, h in enumerate(text.SLICE_COLUMNS) if i not in columns]
    return _table(arm, columns), left_out


def verdicts(report: Report) -> Table:
    """One line per arm: name, decision with its exit code, the `all` CFR with its bound, the reason."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for arm in report.arms:
        name, decision, rest = text.verdict_parts(arm)
        grid.add_row(name, Text(decision, style=COLOURS.get(arm.decision, "")), rest)
    return grid


def gate_text(report: Report) -> Text:
    overall = Text("gate: ", style="bold")
    overall.append(decision_text(report.decision))
    overall.append(f" (exit {report.exit_code})")
    return overall


def _header(report: Report, console: Console) -> None:
    console.print(Text(text.policy_line(report)))
    if report.policy.changed_reason:
        console.print(
            Text("policy changed after the run: ", style="yellow") + Text(report.policy.changed_reason)
        )
    console.print(Text(text.control_line(report)))
    console.print(Text(text.noise_line(report)))
    for check in report.isolation:
        if not check.ok:
            console.print(
                f"[bold magenta]isolation error[/bold magenta] {escape(check.arm)}: {escape(check.detail)}"
            )
    for note in report.notes:
        console.print(Text("note: " + note, style="yellow"))


def _arm(arm: Arm, console: Console) -> None:
    table, left_out = arm_table(arm, console)
    console.print(table)
    if left_out:
        console.print(Text(f"  not shown at this width: {', '.join(left_out)}", style="dim"))
    verdict = Text(f"{arm.arm}: ")
    verdict.append(decision_text(arm.decision))
    verdict.append(f" — {arm.reason}")
    console.print(verdict)
    for line in text.holding_back(arm):
        console.print(Text("  needs: " + line, style="yellow"))
    if arm.failures:
        shown = arm.failures[: text.EXAMPLES]
        console.print(Text("  " + text.examples_heading(arm, len(shown)) + ":"))
        for f in shown:
            fields = dict(text.example_fields(f, 60))
            console.print(Text(f"    {fields['case']} · diverges at token {fields['first divergent token']}"))
            for label in ("prompt", "expected", "control", "candidate", "validator"):
                console.print(Text(f"      {label + ':':<11}{fields[label]}"))
    for line in text.gains_lines(arm):
        console.print(Text("  " + line))
    for line in text.arm_details(arm):
        console.print(Text("  " + line, style="dim"))


def render_terminal(report: Report | dict[str, Any], console: Console) -> None:
    """The report (or its parsed JSON) printed on `console`."""
    from kvgate.report.renderers import as_report

    report = as_report(report)
    console.print(Text("kvgate report · ", style="bold") + Text(text.run_line(report)))
    console.print(verdicts(report))
    console.print(gate_text(report))
    if report.compare is not None:
        from kvgate.report.compare_text import headline, regression_lines

        console.print(Text(headline(report.compare), style="bold"))
        for line in regression_lines(report.compare):
            console.print(Text(line, style="bold red"))
    console.print()
    _header(report, console)
    for arm in report.arms:
        console.print()
        _arm(arm, console)
    console.print()
    console.print(Text(text.LEGEND, style="dim"))
    if report.compare is not None:
        from kvgate.report.compare_text import render_compare_terminal

        console.print()
        render_compare_terminal(report.compare, console)
    console.print(gate_text(report))
