"""The HTML report's plots, drawn with matplotlib and returned as inline SVG text.

Each reads only the report JSON: CFR with its upper bound against τ per slice, CFR against context
length, and where outputs first diverge from the control. SVGs are deterministic (fixed hash salt, no
date) and self-contained (glyphs as paths), so a report renders the same anywhere, offline.
"""

from __future__ import annotations

import io
import os
from itertools import pairwise
from typing import Any

from kvgate.errors import BadInput
from kvgate.paths import cache_dir
from kvgate.report.document.arm import Arm
from kvgate.report.document.report import Report
from kvgate.report.document.slice import Slice
from kvgate.report.render.text import shown_slices

COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "inconclusive": "#f9a825", "error": "#8e24aa"}
SERIES = ["#1565c0", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#558b2f", "#4e342e", "#37474f"]
MAX_CONTEXT_PANELS = 12
"""Arms drawn in the CFR-by-context figure (one panel each)."""
RC: Any = {"svg.hashsalt": "kvgate", "svg.fonttype": "path", "font.size": 9, "axes.spines.top": False,
      "axes.spines.right": False}  # fmt: skip


def _matplotlib() -> Any:
    """matplotlib, with its config and font cache in kvgate's cache (or $MPLCONFIGDIR): left to itself
    it writes ~/.config/matplotlib and ~/.cache/matplotlib, files outside anything kvgate was asked to
    write."""
    os.environ.setdefault("MPLCONFIGDIR", str(cache_dir() / "matplotlib"))
    import matplotlib

    return matplotlib


def _figure(width: float, height: float) -> Any:
    try:
        _matplotlib()
        from matplotlib.figure import Figure
    except ImportError:
        raise BadInput("the HTML report needs matplotlib: pip install 'kvgate[report]'") from None
    return Figure(figsize=(width, height), layout="constrained")


def _percent() -> Any:
    from matplotlib.ticker import PercentFormatter

    return PercentFormatter(1.0)


def _svg(fig: Any) -> str:
    matplotlib = _matplotlib()
    buf = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg") :].strip()


def x_limit(slices: list[Slice]) -> float:
    """The right edge of a CFR axis: past the largest bound and τ, with room for a dot at 100%."""
    top = max([0.05] + [s.cfr_upper or 0.0 for s in slices] + [s.tau for s in slices])
    return min(1.06, top * 1.1)


def cfr_by_slice(arm: Arm) -> str:
    """Per slice: CFR (dot) to its one-sided upper bound (bar), τ (tick), coloured by decision."""
    matplotlib = _matplotlib()
    slices = shown_slices(arm)  # as the table below it
    with matplotlib.rc_context(RC):
        fig = _figure(7.5, 0.8 + 0.28 * len(slices))
        ax = fig.add_subplot()
        for y, s in enumerate(slices):
            colour = COLOURS.get(s.decision, "#555555")
            ax.plot([s.tau] * 2, [y - 0.35, y + 0.35], color="#222222", linewidth=1.5)
            if s.cfr is None:
                ax.text(0, y, " n = 0: no evidence", va="center", fontsize=8, color="#555555")
                continue
            ax.plot(
                [s.cfr, s.cfr_upper],
                [y, y],
                color=colour,
                linewidth=4,
                alpha=0.45,
                solid_capstyle="butt",
            )
            ax.plot([s.cfr], [y], "o", color=colour, markersize=5, clip_on=False)
        ax.set_yticks(range(len(slices)), [s.slice for s in slices])
        ax.invert_yaxis()
        ax.set_xlim(0, x_limit(slices))
        ax.xaxis.set_major_formatter(_percent())
        ax.set_xlabel("CFR (dot) and its one-sided upper bound (bar); black tick: τ")
        ax.grid(axis="x", alpha=0.3)
        return _svg(fig)


def cfr_by_context(report: Report) -> str | None:
    """CFR against median prompt length per context bucket: one panel per arm (shared axes), each a line
    with a band to the upper bound, so arms never overlap."""
    matplotlib = _matplotlib()
    plotted = [a for a in report.arms if any(p.cfr is not None and p.prompt_tokens for p in a.by_context)]
    if not plotted:
        return None
    arms = plotted[:MAX_CONTEXT_PANELS]  # the layout's cost grows faster than its panels
    ticks = {p.prompt_tokens: p.bucket for a in arms for p in a.by_context if p.prompt_tokens}
    columns = min(3, len(arms))
    rows = -(-len(arms) // columns)
    with matplotlib.rc_context(RC):
        fig = _figure(7.5, 0.6 + 2.2 * rows)
        axes = fig.subplots(rows, columns, squeeze=False, sharex=True, sharey=True).ravel()
        top = 0.05
        for i, (ax, arm) in enumerate(zip(axes, arms, strict=False)):
            points = [p for p in arm.by_context if p.cfr is not None and p.prompt_tokens]
            x = [p.prompt_tokens for p in points]
            colour = SERIES[i % len(SERIES)]
            ax.plot(x, [p.cfr for p in points], "o-", color=colour, clip_on=False)
            ax.fill_between(
                x, [p.cfr for p in points], [p.cfr_upper for p in points], color=colour, alpha=0.15
            )
            ax.axhline(report.policy.tau, color="#222222", linestyle="--", linewidth=1)
            ax.set_title(arm.arm, fontsize=9, loc="left")
            ax.grid(alpha=0.3)
            top = max(top, report.policy.tau, *(p.cfr_upper or 0.0 for p in points))
        for ax in axes[len(arms) :]:
            ax.set_visible(False)
        first = axes[0]
        first.set_xscale("log", base=2)
        first.set_xticks(sorted(ticks), [f"{ticks[t]}\n({t:g})" for t in sorted(ticks)])
        first.minorticks_off()
        if len(ticks) == 1:
            only = next(iter(ticks))
            first.set_xlim(only / 1.5, only * 1.5)
        first.yaxis.set_major_formatter(_percent())
        first.set_ylim(0, min(1.06, top * 1.1))
        more = f"; the first {len(arms)} of {len(plotted)} arms (the JSON has all)" if arms != plotted else ""
        fig.supxlabel(f"context bucket (median prompt tokens){more}", fontsize=9)
        fig.supylabel("CFR (band: to the upper bound)", fontsize=9)
        return _svg(fig)


def divergence(report: Report) -> str | None:
    """Histograms of the first output token where each arm leaves the control, by candidate verdict."""
    matplotlib = _matplotlib()
    from matplotlib.ticker import MaxNLocator

    arms = [a for a in report.arms if a.divergence.diverged]
    if not arms:
        return None
    with matplotlib.rc_context(RC):
        fig = _figure(7.5, 0.6 + 1.5 * len(arms))
        axes = fig.subplots(len(arms), 1, squeeze=False)[:, 0]
        for ax, arm in zip(axes, arms, strict=True):
            d = arm.divergence
            edges = d.bin_edges
            left, widths = edges[:-1], [b - a for a, b in pairwise(edges)]
            single = all(w == 1 for w in widths)  # one bar per token index, centred on it
            where, bar_widths, align = (left, 0.8, "center") if single else (left, widths, "edge")
            ax.bar(
                where,
                d.failed,
                width=bar_widths,
                align=align,
                color=COLOURS["fail"],
                label="candidate failed",
            )
            ax.bar(
                where,
                d.passed,
                width=bar_widths,
                align=align,
                bottom=d.failed,
                color="#90a4ae",
                label="still passed",
            )
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # token indices: never fractional ticks
            counts = [f + p for f, p in zip(d.failed, d.passed, strict=True)]
            at = [edges[i] for i, c in enumerate(counts) if c]
            only = f", all at token {at[0]}" if len(at) == 1 and single else ""
            ax.set_title(f"{arm.arm}: {d.diverged}/{d.n_pairs} outputs diverge{only}", fontsize=9, loc="left")
            if single and len(left) < 3:  # room on both sides, so one bar is not the whole axis
                ax.set_xlim(-1.5, len(left) + 0.5)
            ax.set_ylabel("pairs")
            ax.grid(axis="y", alpha=0.3)
        axes[0].legend(fontsize=8, frameon=False)
        axes[-1].set_xlabel("first output token where the candidate leaves the control's output")
        return _svg(fig)
