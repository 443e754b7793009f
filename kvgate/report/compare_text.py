"""Rendering of a run comparison (the report's `compare` block) for the terminal, Markdown and HTML.

Shown per arm: the `all` slice, and every slice whose counts or decision changed.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kvgate.report.document.compare import Compare, CompareArm, CompareSlice
from kvgate.report.text import pct

HEADERS = ("arm", "slice", "fail/pass", "CFR", "ΔCFR", "upper", "decision", "change")
CHANGE_STYLE = {
    "regression": "bold red",
    "improvement": "green",
    "new": "cyan",
    "removed": "cyan",
    "same": "",
}


def _counts(k: int | None, n: int | None) -> str:
    return "—" if k is None or n is None else f"{k}/{n}"


def _signed(delta: float | None) -> str:
    return "—" if delta is None else f"{100 * delta:+.1f} pp"


def _arrow(before: str, after: str) -> str:
    return after if before == after else f"{before} → {after}"


def shown_slices(arm: CompareArm) -> list[CompareSlice]:
    return [
        s
        for s in arm.slices
        if s.slice == "all"
        or s.change != "same"
        or (s.cache_induced_failures, s.control_passes)
        != (s.baseline_cache_induced_failures, s.baseline_control_passes)
    ]


def arm_label(arm: CompareArm) -> str:
    return arm.arm + (" (spec changed)" if arm.spec_changed else "")


def cells(s: CompareSlice) -> list[str]:
    """slice, fail/pass, CFR, ΔCFR, upper, decision, change: baseline → current where they differ."""
    return [
        s.slice,
        _arrow(
            _counts(s.baseline_cache_induced_failures, s.baseline_control_passes),
            _counts(s.cache_induced_failures, s.control_passes),
        ),
        _arrow(pct(s.baseline_cfr), pct(s.cfr)),
        _signed(s.cfr_delta),
        _arrow(pct(s.baseline_cfr_upper), pct(s.cfr_upper)),
        _arrow(s.baseline_decision or "—", s.decision or "—"),
        s.change,
    ]


def rows(compare: Compare) -> list[list[str]]:
    return [[arm_label(arm), *cells(s)] for arm in compare.arms for s in shown_slices(arm)]


def regression_lines(compare: Compare) -> list[str]:
    """One line per regression against the baseline (what nightly jobs read first)."""
    lines = []
    for r in compare.regressions:
        p = "" if r.rise_p_holm is None else f", Holm p {r.rise_p_holm:.2g}"
        lines.append(
            f"REGRESSION {r.arm} / {r.slice}: CFR {pct(r.baseline_cfr)} → {pct(r.cfr)} "
            f"({_signed(r.cfr_delta)}{p}), {r.from_ or '—'} → {r.to or '—'}: {r.why}"
        )
    return lines


def headline(compare: Compare) -> str:
    cur, base = compare.current, compare.baseline
    text = (
        f"compared with run {base.run_id}: gate {base.decision} → {cur.decision} "
        f"({compare.decision_change}); {len(compare.regressions)} slice regressions"
    )
    if compare.differs:
        text += "; the runs differ in " + ", ".join(compare.differs)
    return text


TERMINAL_ORDER = (0, 6, 1, 2, 3, 4, 5)
"""Columns of cells() in the terminal's order: slice and change first, then the figures."""
KEEP_FIRST = (0, 6, 3, 1, 5, 2, 4)
"""Which columns stay when the terminal is narrow: slice, change, ΔCFR, counts, decision, CFR, upper."""


def fitted(rows: list[list[str]], width: int) -> list[int]:
    """The columns of cells() that fit in `width` (two cells between columns), in TERMINAL_ORDER; a
    column is left out whole rather than cut."""
    from rich.cells import cell_len

    widths = [max(cell_len(HEADERS[1 + i]), *(cell_len(r[i]) for r in rows)) for i in range(len(HEADERS) - 1)]
    chosen: list[int] = []
    used = 0
    for i in KEEP_FIRST:
        if chosen and used + 2 + widths[i] > width:
            continue
        chosen.append(i)
        used += widths[i] + (2 if len(chosen) > 1 else 0)
    return [i for i in TERMINAL_ORDER if i in chosen]


def render_compare_terminal(compare: Compare, console: Console) -> None:
    console.print(Text(headline(compare), style="bold"))
    for arm in compare.arms:
        decision = _arrow(arm.baseline_decision or "—", arm.decision or "—")
        table = Table(
            title=f"{arm_label(arm)}: {decision} ({arm.change})",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
        )
        body = [cells(s) for s in shown_slices(arm)]
        columns = fitted(body, console.width)
        for i in columns:
            table.add_column(
                HEADERS[1 + i], justify="right" if 1 <= i <= 4 else "left", no_wrap=i > 0, overflow="fold"
            )
        for row in body:
            table.add_row(
                *(Text(row[i], style=CHANGE_STYLE.get(row[i], "")) if i == 6 else row[i] for i in columns)
            )
        console.print(table)
        left_out = [HEADERS[1 + i] for i in range(len(HEADERS) - 1) if i not in columns]
        if left_out:
            console.print(Text(f"  not shown at this width: {', '.join(left_out)}", style="dim"))


def compare_markdown(compare: Compare) -> list[str]:
    from kvgate.report.markdown import table

    lines = [f"### Comparison: {headline(compare)}", ""]
    body = [
        [f"`{r[0]}`", f"`{r[1]}`", *r[2:-1], f"**{r[-1]}**" if r[-1] == "regression" else r[-1]]
        for r in rows(compare)
    ]
    lines += table(list(HEADERS), body, right={2, 3, 4, 5})
    lines.append("")
    return lines
