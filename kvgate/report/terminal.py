"""The terminal report: a rich table per arm, numerator/denominator visible, decisions in colour."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kvgate.report import text

COLOURS = {"pass": "green", "fail": "bold red", "inconclusive": "yellow", "error": "bold magenta"}


def decision_text(decision: str) -> Text:
    return Text(decision.upper(), style=COLOURS.get(decision, ""))


def arm_table(arm: dict[str, Any]) -> Table:
    table = Table(
        title=text.arm_title(arm),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        title_style="bold",
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column(text.SLICE_COLUMNS[0], overflow="fold", min_width=30)
    for header in text.SLICE_COLUMNS[1:-1]:
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column(text.SLICE_COLUMNS[-1], no_wrap=True)
    for s in arm["slices"]:
        cells: list[Any] = text.slice_cells(s)
        cells[-1] = decision_text(s["decision"])
        table.add_row(*cells)
    return table


def render_terminal(report: dict[str, Any], console: Console) -> None:
    console.print(Text("kvgate report · ", style="bold") + Text(text.run_line(report)))
    console.print(Text(text.policy_line(report)))
    if report["policy"]["changed_reason"]:
        console.print(
            Text("policy changed after the run: ", style="yellow") + Text(report["policy"]["changed_reason"])
        )
    console.print(Text(text.control_line(report)))
    console.print(Text(text.noise_line(report)))
    for check in report["isolation"]:
        if not check["ok"]:
            console.print(
                f"[bold magenta]isolation error[/bold magenta] {escape(check['arm'])}: "
                f"{escape(check['detail'])}"
            )
    for note in report["notes"]:
        console.print(Text("note: " + note, style="yellow"))
    for arm in report["arms"]:
        console.print()
        console.print(arm_table(arm))
        verdict = Text(f"{arm['arm']}: ")
        verdict.append(decision_text(arm["decision"]))
        verdict.append(f" — {arm['reason']}")
        console.print(verdict)
        for line in text.arm_details(arm):
            console.print(Text("  " + line, style="dim"))
    console.print()
    console.print(Text(text.LEGEND, style="dim"))
    if "compare" in report:
        from kvgate.report.compare_text import render_compare_terminal

        console.print()
        render_compare_terminal(report["compare"], console)
    overall = Text("gate: ", style="bold")
    overall.append(decision_text(report["decision"]))
    overall.append(f" (exit {report['exit_code']})")
    console.print(overall)
