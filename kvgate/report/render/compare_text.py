"""A run comparison (the report's `compare` block) in words, for every format: its headline, one line per
regression, and per arm the `all` slice and every slice whose counts or decision changed (the table and
Markdown renderers lay them out).
"""

from __future__ import annotations

from kvgate.report.document.compare import Compare, CompareArm, CompareSlice
from kvgate.report.render.text import pct

HEADERS = ("arm", "slice", "fail/pass", "CFR", "ΔCFR", "upper", "decision", "change")


def _counts(k: int | None, n: int | None) -> str:
    return "—" if k is None or n is None else f"{k}/{n}"


def _signed(delta: float | None) -> str:
    return "—" if delta is None else f"{100 * delta:+.1f} pp"


def arrow(before: str, after: str) -> str:
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
        arrow(
            _counts(s.baseline_cache_induced_failures, s.baseline_control_passes),
            _counts(s.cache_induced_failures, s.control_passes),
        ),
        arrow(pct(s.baseline_cfr), pct(s.cfr)),
        _signed(s.cfr_delta),
        arrow(pct(s.baseline_cfr_upper), pct(s.cfr_upper)),
        arrow(s.baseline_decision or "—", s.decision or "—"),
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
