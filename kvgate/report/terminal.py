"""The terminal report: a rich table per arm, numerator/denominator visible, decisions in colour."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

COLOURS = {"pass": "green", "fail": "bold red", "inconclusive": "yellow", "error": "bold magenta"}


def pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def decision_text(decision: str) -> Text:
    return Text(decision.upper(), style=COLOURS.get(decision, ""))


def arm_table(arm: dict[str, Any]) -> Table:
    table = Table(title=f"{arm['arm']} ({arm['kind']})", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("slice", overflow="fold", min_width=12)
    for header in ("fail/pass", "CFR", "upper", "τ", "both✗", "cand✓", "total✗", "McNemar"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("decision", no_wrap=True)
    for s in arm["slices"]:
        table.add_row(
            s["slice"],
            f"{s['cache_induced_failures']}/{s['control_passes']}",
            pct(s["cfr"]),
            pct(s["cfr_upper"]),
            pct(s["tau"]),
            str(s["both_fail"]),
            str(s["candidate_only_passes"]),
            pct(s["total_failure_rate"]),
            "—" if s["mcnemar_p"] is None else f"{s['mcnemar_p']:.3g}",
            decision_text(s["decision"]),
        )
    return table


LEGEND = (
    "fail/pass: cache-induced failures / control passes · upper: one-sided bound of CFR · "
    "both✗: both arms fail (left out) · cand✓: only the candidate passes · total✗: candidate failure rate"
)


def render_terminal(report: dict[str, Any], console: Console) -> None:
    run, policy = report["run"], report["policy"]
    console.print(
        f"[bold]kvgate report[/bold] run {run['run_id']} · model {run['model']['name']} · "
        f"engine {run['engine']['engine']} · {run['n_cases']} cases"
    )
    console.print(
        f"policy: τ={policy['tau']} rule={policy['rule']} confidence={policy['confidence']} "
        f"min_control_passes={policy['min_control_passes']}"
    )
    if policy["changed_reason"]:
        console.print(f"[yellow]policy changed after the run:[/yellow] {policy['changed_reason']}")
    control = report["control"]
    console.print(f"control {control['arm']}: {control['passes']}/{control['n']} cases pass")
    floor = report["noise_floor"]
    if floor:
        console.print(
            f"A/A noise floor: {floor['flips']}/{floor['n_pairs']} verdict flips, "
            f"{floor['token_divergences']} token divergences"
        )
    for check in report["isolation"]:
        if not check["ok"]:
            console.print(f"[bold magenta]isolation error[/bold magenta] {check['arm']}: {check['detail']}")
    parts: list[Any] = []
    for arm in report["arms"]:
        parts.append(arm_table(arm))
        line = Text(f"{arm['arm']}: ")
        line.append(decision_text(arm["decision"]))
        line.append(f" — {arm['reason']}")
        if arm["engine_errors"]:
            line.append(f" · {arm['engine_errors']} engine errors (not counted as failures)")
        parts.append(line)
    console.print(Group(*parts))
    console.print(f"[dim]{LEGEND}[/dim]")
    overall = Text("gate: ")
    overall.append(decision_text(report["decision"]))
    overall.append(f" (exit {report['exit_code']})")
    console.print(overall)
