"""The Markdown report: for CI step summaries ($GITHUB_STEP_SUMMARY) and release reviews.

It opens with one verdict line per arm; each arm's slice table is folded in `<details>`, so a 10-arm
report of 60 slices each stays under GitHub's 65,536-character comment limit.
"""

from __future__ import annotations

from typing import Any

from kvgate.report.document.arm import Arm
from kvgate.report.document.compare import Compare
from kvgate.report.document.report import Report
from kvgate.report.document.slice import Slice
from kvgate.report.render import compare_text, text

"""Failing examples shown per arm (the JSON has all)."""
EXAMPLE_WIDTH = 60
LIMIT = 65_536
"""GitHub's limit on a comment (and on a step summary's part), in characters."""
BUDGET = LIMIT - 2_000
ALL_COLUMNS = tuple(range(len(text.SLICE_COLUMNS)))
LEVELS: tuple[tuple[tuple[int, ...], bool] | None, ...] = (
    (ALL_COLUMNS, False),
    ((0, 1, 2, 3, 4, 9, 10), False),  # slice, counts, CFR, bound, τ, adj p, decision
    ((0, 1, 3, 10), False),  # slice, counts, bound, decision (as its mark)
    ((0, 1, 2, 3, 4, 9, 10), True),  # only the notable slices
    None,  # no slice tables
)
"""How far slice tables shrink, in turn, until the report fits BUDGET: (SLICE_COLUMNS shown, notable
slices only)."""


def cell(value: str) -> str:
    """A table cell: pipes escaped, no line breaks."""
    return value.replace("|", "\\|").replace("\n", " ")


def code(value: str) -> str:
    """Inline code that survives backticks in the value."""
    return "`` " + value.replace("\n", " ") + " ``" if "`" in value else f"`{value}`"


def table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    align = ["---:" if i in right else ":---" for i in range(len(headers))]
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def verdicts(report: Report) -> list[str]:
    rows = []
    for a in report.arms:
        name, decision, rest = text.verdict_parts(a)
        rows.append([code(name), f"{text.DECISION_MARK[a.decision]} {decision}", rest])
    return table(["arm", "verdict", "CFR on `all` · reason"], rows, right=set())


SHORT_EXAMPLES = 3
"""Examples per arm once slice tables show only the notable slices (a report too big for one comment)."""


def examples(arm: Arm, level: int = 0) -> list[str]:
    if not arm.failures:
        return []
    shape = LEVELS[level]
    notable_only = shape is None or shape[1]
    shown = arm.failures[: SHORT_EXAMPLES if notable_only else text.EXAMPLES]
    headers = ["case", "prompt", "expected", "control", "candidate", "validator", "diverges at"]
    rows = [[v for _, v in text.example_fields(f, EXAMPLE_WIDTH)] for f in shown]
    return [f"**{text.examples_heading(arm, len(shown))}**", "", *table(headers, rows, right={6}), ""]


def notable(s: Slice) -> bool:
    """A slice shown even in the shortest form: a gate, a failing slice or a signal that stands out."""
    return s.gated or s.decision == "fail" or s.flagged


def slice_table(arm: Arm, level: int = 0) -> list[str]:
    """The arm's slices folded in <details>, with the columns and slices of LEVELS[level]."""
    shape = LEVELS[level]
    if shape is None:
        return [f"{len(arm.slices)} slices: in --format json or html (too many for one comment)", ""]
    columns, notable_only = shape
    shown = text.shown_slices(arm)
    slices = [s for s in shown if not notable_only or notable(s)]
    rows = []
    terse = len(columns) <= 4
    for s in slices:
        cells = text.slice_cells(s, arm.lossless)
        mark = text.DECISION_MARK[s.decision]
        cells[-1] = mark if terse else f"{mark} {s.decision}"
        name = s.slice if terse else f"`{s.slice}`"
        cells[0] = f"{name} {text.slice_marks(s, arm.lossless)}".rstrip()
        rows.append([cells[i] for i in columns])
    left = len(shown) - len(slices)
    summary = f"{len(rows)} slices" + (
        f" (gates, failing and standing out; {left} more in --format json)" if left else ""
    )
    return [
        f"<details><summary>{summary}</summary>",
        "",
        *table([text.SLICE_COLUMNS[i] for i in columns], rows, right=set(range(1, len(columns) - 1))),
        "",
        "</details>",
        "",
    ]


def arm_section(arm: Arm, level: int = 0) -> list[str]:
    mark = text.DECISION_MARK[arm.decision]
    lines = [f"### {mark} {cell(text.arm_title(arm))}: {arm.decision.upper()}", "", f"{arm.reason}", ""]
    lines += [f"- needs: {line}" for line in text.holding_back(arm)]
    lines += [f"- {line}" for line in text.gains_lines(arm)]
    lines.append("")
    lines += examples(arm, level)
    lines += slice_table(arm, level)
    lines += [f"- {line}" for line in text.arm_details(arm)]
    lines.append("")
    return lines


def render_markdown(report: Report, **_: Any) -> str:
    """The report, its slice tables shortened only as far as needed to stay within BUDGET characters."""
    for level in range(len(LEVELS) - 1):
        out = _render(report, level)
        if len(out) <= BUDGET:
            return out
    return _render(report, len(LEVELS) - 1)


def _render(report: Report, level: int) -> str:
    mark = text.DECISION_MARK[report.decision]
    lines = [f"## {mark} kvgate: {report.decision.upper()} (exit {report.exit_code})", ""]
    lines += verdicts(report)
    if report.compare is not None:
        lines += ["", f"**{compare_text.headline(report.compare)}**"]
        lines += [f"- ❌ {line}" for line in compare_text.regression_lines(report.compare)]
    lines += ["", f"- {text.run_line(report)}", f"- {text.policy_line(report)}"]
    if report.policy.changed_reason:
        lines.append(f"- **policy changed after the run:** {report.policy.changed_reason}")
    lines += [f"- {text.control_line(report)}", f"- {text.noise_line(report)}"]
    lines += [f"- 🛑 isolation error, {c.arm}: {c.detail}" for c in report.isolation if not c.ok]
    lines += [f"- note: {note}" for note in report.notes]
    lines.append("")
    for arm in report.arms:
        lines += arm_section(arm, level)
    lines += [f"<sub>{text.LEGEND}</sub>", ""]
    if report.compare is not None:
        lines += compare_markdown(report.compare)
    return "\n".join(lines)


def compare_markdown(compare: Compare) -> list[str]:
    lines = [f"### Comparison: {compare_text.headline(compare)}", ""]
    body = [
        [f"`{r[0]}`", f"`{r[1]}`", *r[2:-1], f"**{r[-1]}**" if r[-1] == "regression" else r[-1]]
        for r in compare_text.rows(compare)
    ]
    lines += table(list(compare_text.HEADERS), body, right={2, 3, 4, 5})
    lines.append("")
    return lines
