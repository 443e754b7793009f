"""The Markdown report: for CI step summaries ($GITHUB_STEP_SUMMARY) and release reviews."""

from __future__ import annotations

from typing import Any

from kvgate.report import text


def cell(value: str) -> str:
    """A table cell: pipes escaped, no line breaks."""
    return value.replace("|", "\\|").replace("\n", " ")


def table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    align = ["---:" if i in right else ":---" for i in range(len(headers))]
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def arm_section(arm: dict[str, Any]) -> list[str]:
    mark = text.DECISION_MARK[arm["decision"]]
    lines = [f"### {mark} {cell(text.arm_title(arm))}: {arm['decision'].upper()}", "", f"{arm['reason']}", ""]
    headers = list(text.SLICE_COLUMNS)
    rows = []
    for s in arm["slices"]:
        cells = text.slice_cells(s)
        cells[-1] = f"{text.DECISION_MARK[s['decision']]} {s['decision']}"
        cells[0] = f"`{s['slice']}` {text.slice_marks(s)}".rstrip()
        rows.append(cells)
    lines += table(headers, rows, right=set(range(1, len(headers) - 1)))
    lines.append("")
    lines += [f"- {line}" for line in text.arm_details(arm)]
    lines.append("")
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    mark = text.DECISION_MARK[report["decision"]]
    lines = [
        f"## {mark} kvgate: {report['decision'].upper()} (exit {report['exit_code']})",
        "",
        f"- {text.run_line(report)}",
        f"- {text.policy_line(report)}",
    ]
    if report["policy"]["changed_reason"]:
        lines.append(f"- **policy changed after the run:** {report['policy']['changed_reason']}")
    lines += [f"- {text.control_line(report)}", f"- {text.noise_line(report)}"]
    lines += [f"- 🛑 isolation error, {c['arm']}: {c['detail']}" for c in report["isolation"] if not c["ok"]]
    lines += [f"- note: {note}" for note in report["notes"]]
    lines.append("")
    summary = [
        [f"`{a['arm']}`", a["kind"], f"{text.DECISION_MARK[a['decision']]} {a['decision']}", a["reason"]]
        for a in report["arms"]
    ]
    lines += table(["arm", "kind", "decision", "why"], summary, right=set())
    lines.append("")
    for arm in report["arms"]:
        lines += arm_section(arm)
    lines += [f"<sub>{text.LEGEND}</sub>", ""]
    if "compare" in report:
        from kvgate.report.compare_text import compare_markdown

        lines += compare_markdown(report["compare"])
    return "\n".join(lines)
