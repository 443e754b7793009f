"""The terminal report: one verdict line per arm first, then per arm a table fitted to the console's
width (slice and decision always shown, minor columns left out when narrow), what held an inconclusive
arm back, failing examples and gains; decisions in colour."""

from __future__ import annotations

import io
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kvgate.report.document.arm import Arm
from kvgate.report.document.compare import Compare
from kvgate.report.document.report import Report, as_report
from kvgate.report.render import compare_text, text

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


def render_table(report: Report, width: int = 120, **_: Any) -> str:
    """The table as plain text `width` columns wide (no colour), each line without trailing spaces: what
    `--format table` writes to a file or a pipe."""
    buffer = io.StringIO()
    render_terminal(report, Console(file=buffer, width=width, color_system=None))
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


def render_terminal(report: Report | dict[str, Any], console: Console) -> None:
    """The report (or its parsed JSON) printed on `console`."""
    report = as_report(report)
    console.print(Text("kvgate report · ", style="bold") + Text(text.run_line(report)))
    console.print(verdicts(report))
    console.print(gate_text(report))
    if report.compare is not None:
        console.print(Text(compare_text.headline(report.compare), style="bold"))
        for line in compare_text.regression_lines(report.compare):
            console.print(Text(line, style="bold red"))
    console.print()
    _header(report, console)
    for arm in report.arms:
        console.print()
        _arm(arm, console)
    console.print()
    console.print(Text(text.LEGEND, style="dim"))
    if report.compare is not None:
        console.print()
        compare_table(report.compare, console)
    console.print(gate_text(report))


CHANGE_STYLE = {
    "regression": "bold red",
    "improvement": "green",
    "new": "cyan",
    "removed": "cyan",
    "same": "",
}


TERMINAL_ORDER = (0, 6, 1, 2, 3, 4, 5)
"""Columns of cells() in the terminal's order: slice and change first, then the figures."""
KEEP_FIRST = (0, 6, 3, 1, 5, 2, 4)
"""Which columns stay when the terminal is narrow: slice, change, ΔCFR, counts, decision, CFR, upper."""


def fitted(rows: list[list[str]], width: int) -> list[int]:
    """The columns of cells() that fit in `width` (two cells between columns), in TERMINAL_ORDER; a
    column is left out whole rather than cut."""
    widths = [
        max(cell_len(compare_text.HEADERS[1 + i]), *(cell_len(r[i]) for r in rows))
        for i in range(len(compare_text.HEADERS) - 1)
    ]
    chosen: list[int] = []
    used = 0
    for i in KEEP_FIRST:
        if chosen and used + 2 + widths[i] > width:
            continue
        chosen.append(i)
        used += widths[i] + (2 if len(chosen) > 1 else 0)
    return [i for i in TERMINAL_ORDER if i in chosen]


def compare_table(compare: Compare, console: Console) -> None:
    console.print(Text(compare_text.headline(compare), style="bold"))
    for arm in compare.arms:
        decision = compare_text.arrow(arm.baseline_decision or "—", arm.decision or "—")
        table = Table(
            title=f"{compare_text.arm_label(arm)}: {decision} ({arm.change})",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
        )
        body = [compare_text.cells(s) for s in compare_text.shown_slices(arm)]
        columns = fitted(body, console.width)
        for i in columns:
            table.add_column(
                compare_text.HEADERS[1 + i],
                justify="right" if 1 <= i <= 4 else "left",
                no_wrap=i > 0,
                overflow="fold",
            )
        for row in body:
            table.add_row(
                *(Text(row[i], style=CHANGE_STYLE.get(row[i], "")) if i == 6 else row[i] for i in columns)
            )
        console.print(table)
        left_out = [
            compare_text.HEADERS[1 + i] for i in range(len(compare_text.HEADERS) - 1) if i not in columns
        ]
        if left_out:
            console.print(Text(f"  not shown at this width: {', '.join(left_out)}", style="dim"))
