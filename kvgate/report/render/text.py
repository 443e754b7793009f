"""Wording shared by every renderer: numbers, decisions and the one-line summaries of a report's parts.

Each function reads only the report model (report.document), so the terminal, Markdown and HTML say the
same thing.
"""

from __future__ import annotations

import json
from typing import Any

from kvgate.report.document.arm import Arm
from kvgate.report.document.findings import AucInterval, ClassInterval, Failure, Sequential
from kvgate.report.document.gains import Gains, Timing
from kvgate.report.document.report import Report
from kvgate.report.document.slice import Slice
from kvgate.report.document.treatment import SpecComposite, SpecEviction, Treatment
from kvgate.report.render.proof_text import proof_line
from kvgate.report.render.stress_text import stress_line

DECISION_MARK = {"pass": "✅", "fail": "❌", "inconclusive": "⚠️", "error": "🛑"}
SLICE_COLUMNS = (
    "slice",
    "fail/pass",
    "CFR",
    "upper",
    "τ",
    "both✗",
    "cand✓",
    "total✗",
    "A/A✗",
    "adj p",
    "decision",
)
LEGEND = (
    "fail/pass: cache-induced failures / control passes · upper: one-sided bound of CFR · "
    "both✗: both arms fail (left out) · cand✓: only the candidate passes · total✗: candidate failure rate · "
    "A/A✗: control verdicts its replicate flips · adj p: weighted-Holm adjusted p (gate) or BH q (signal) · "
    "★ gated slice (the arm passes only if it does) · ⚑ critical slice · ↑ signal that stands out (q ≤ α); "
    "signals fail the arm only on a clear regression (adjusted p ≤ α)"
)


def pct(value: float | None) -> str:
    """A rate as a percentage; "—" when there is no evidence (never 0.0 for an empty slice)."""
    return "—" if value is None else f"{100 * value:.1f}%"


def pct0(value: float | None) -> str:
    """A rate as a whole percentage; "—" without evidence."""
    return "—" if value is None else f"{100 * value:.0f}%"


def pval(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def slice_marks(s: Slice, lossless: bool = False) -> str:
    """★ gated, ⚑ critical (the workload's or the policy's; in a lossless arm, whose every slice is
    critical by its rule, only the `critical` slice itself: the arm's title says the rest), ↑ stands out."""
    critical = s.critical and (not lossless or s.slice == "critical")
    return ("★" if s.gated else "") + ("⚑" if critical else "") + ("↑" if s.flagged else "")


def adjusted(s: Slice) -> str:
    """The slice's multiplicity-adjusted figure: Holm p for a gate, BH q for a signal."""
    return pval(s.adjusted_p if s.role == "gate" else s.q_value)


def slice_label(s: Slice, lossless: bool = False) -> str:
    marks = slice_marks(s, lossless)
    return f"{s.slice} {marks}" if marks else s.slice


def slice_cells(s: Slice, lossless: bool = False) -> list[str]:
    """The cells of one slice row, in SLICE_COLUMNS order, decision last (uncoloured)."""
    return [
        slice_label(s, lossless),
        f"{s.cache_induced_failures}/{s.control_passes}",
        pct(s.cfr),
        pct(s.cfr_upper),
        pct(s.tau),
        str(s.both_fail),
        str(s.candidate_only_passes),
        pct(s.total_failure_rate),
        pct(s.aa_flip_rate),
        adjusted(s),
        s.decision.upper(),
    ]


def run_line(report: Report) -> str:
    run = report.run
    model, engine = run.model.name, run.engine.engine
    if run.stack_version is not None:
        stack = run.stack_version
        engine += f" ({stack.stack} {stack.version or '(version not named)'})"
    created = f" · created {run.created_at}" if run.created_at else ""
    return f"run {run.run_id} · model {model} · engine {engine} · {run.n_cases} cases{created}"


def policy_line(report: Report) -> str:
    p = report.policy
    parts = [
        f"τ={pct(p.tau)}",
        f"rule={p.rule}",
        f"confidence={pct(p.confidence)}",
        f"min_control_passes={p.min_control_passes}",
    ]
    parts.append(f"signal_alpha={p.signal_alpha:g}")
    if p.aa_margin:
        parts.append(f"aa_margin={pct(p.aa_margin)}")
    if p.cluster != "none":
        parts.append(f"clusters: {p.cluster} (defects {p.defects})")
    if p.strata:
        parts.append("strata: " + ", ".join(p.strata))
    if p.critical:
        parts.append("critical: " + ", ".join(p.critical))
    if p.slice_tau:
        parts.append("slice τ: " + ", ".join(f"{k} → {pct(v)}" for k, v in sorted(p.slice_tau.items())))
    line = "policy: " + " · ".join(parts) + f" (sha256 {p.sha256[:12]})"
    if p.unsafe:
        line += f" · UNSAFE ({'; '.join(p.unsafe)}): {p.unsafe_reason or 'no reason stored'}"
    return line


def control_line(report: Report) -> str:
    c = report.control
    text = f"control {c.arm}: {c.passes}/{c.n} cases pass"
    if c.engine_errors:
        text += f" · {c.engine_errors} engine errors"
    return text


def noise_line(report: Report) -> str:
    floor = report.noise_floor
    if floor is None:
        return "A/A noise floor: not measured (the matrix has no A/A replicate)"
    return (
        f"A/A noise floor: {floor.flips}/{floor.n_pairs} verdict flips ({pct(floor.flip_rate)}) · "
        f"A/A CFR {floor.replicate_failures}/{floor.control_passes} "
        f"(upper {pct(floor.aa_cfr_upper)}) · "
        f"{floor.token_divergences} token divergences"
    )


def eviction_text(spec: Treatment) -> str:
    """The eviction parts of a spec: method, scope and, when not kvgate's own, the conventions."""
    parts = spec.of if isinstance(spec, SpecComposite) else [spec]
    out = []
    for part in parts:
        if not isinstance(part, SpecEviction):
            continue
        convention = part.convention or "kvgate"
        conventions = "" if convention == "kvgate" else f", {convention} conventions"
        out.append(f"{part.method}, scope {part.scope}{conventions}")
    return "; ".join(out)


def arm_title(arm: Arm) -> str:
    lossless = " · lossless: any candidate-only failure is a defect" if arm.lossless else ""
    eviction = eviction_text(arm.spec)
    return f"{arm.arm} ({arm.kind}{': ' + eviction if eviction else ''}){lossless}"


def family_line(arm: Arm) -> str:
    """Which slices gate the arm and which are signals, and what stands out among the signals."""
    gates = [s.slice for s in arm.slices if s.role == "gate"]
    signals = [s for s in arm.slices if s.role == "signal"]
    flagged = [s.slice for s in signals if s.flagged]
    line = f"gated: {', '.join(gates)} · {len(signals)} signal slices"
    if flagged:
        more = f" and {len(flagged) - 3} more" if len(flagged) > 3 else ""
        line += f", standing out (BH q ≤ α): {', '.join(flagged[:3])}{more}"
    return line


def sequential_line(q: Sequential) -> str:
    """Where a sequential arm stopped, and why."""
    return f"sequential: stopped at {q.cases} of {q.of_cases} cases after look {q.look} of {q.looks}: {q.why}"


def single_valued(arm: Arm) -> list[str]:
    """The arm's slices `column=value` whose column has that one value in every case (`turns=1` of a
    single-turn trace): each is the whole run again, as is every slice nested with it."""
    everything = headline_slice(arm)
    by_column: dict[str, list[Slice]] = {}
    for s in arm.slices:
        if "/" not in s.slice and "=" in s.slice:
            by_column.setdefault(s.slice.split("=", 1)[0], []).append(s)
    return [
        found[0].slice
        for found in by_column.values()
        if len(found) == 1 and everything is not None and found[0].n_pairs == everything.n_pairs
    ]


def shown_slices(arm: Arm) -> list[Slice]:
    """The slices a table shows: all but the repeats of a single-valued column (`single_valued`) and
    the slices nested with one (each repeats another's rows exactly), unless gated. JSON keeps every
    slice."""
    repeats = set(single_valued(arm))
    return [s for s in arm.slices if s.gated or not repeats & set(s.slice.split("/"))]


def left_out_line(arm: Arm) -> str | None:
    """What the table leaves out (`shown_slices`), named by the single-valued slices it repeats: a gated
    one stays in the table and is not named, though slices nested with it may be left out."""
    shown = {s.slice for s in shown_slices(arm)}
    repeats = single_valued(arm)
    left = [r for r in repeats if r not in shown]
    nested = [s.slice for s in arm.slices if s.slice not in shown and s.slice not in left]
    if not left and not nested:
        return None
    if not nested:
        named = ", ".join(left)
    elif left:
        named = f"{', '.join(left)} and the slices nested with them"
    else:
        named = f"the slices nested with {', '.join(repeats)}"
    return f"not in the table: {named} (every case has that value, so each repeats another row)"


def arm_details(arm: Arm) -> list[str]:
    """Short lines under an arm's table: the gated family, errors, re-runs, confidence, divergence,
    attribution."""
    lines = [family_line(arm)]
    left_out = left_out_line(arm)
    if left_out:
        lines.append(left_out)
    if arm.sequential is not None:
        lines.append(sequential_line(arm.sequential))
    if arm.engine_errors or arm.missing_pairs:
        lines.append(
            f"{arm.engine_errors} engine errors and {arm.missing_pairs} missing pairs "
            "(left out of every count, never counted as failures)"
        )
    if arm.confirm_reruns:
        lines.append(
            f"re-runs ×{arm.confirm_reruns}: {arm.reproducible_failures} reproducible, "
            f"{arm.flaky_failures} flaky, {arm.unconfirmed_failures} unconfirmed"
        )
    n = arm.confidence_auc_n
    auc = "—" if arm.confidence_auc is None else f"{arm.confidence_auc:.2f}"
    lines.append(
        f"confidence AUC {auc} (mean token logprob predicting the candidate's {n.failures} failures "
        f"among {n.failures + n.passes})"
    )
    certificate = certificate_line(arm)
    if certificate:
        lines.append(certificate)
    d = arm.divergence
    median = "" if d.median is None else f", median first divergent token {d.median:g}"
    lines.append(
        f"outputs diverge from the control in {d.diverged}/{d.n_pairs} pairs{median}; "
        f"{d.diverged_and_failed} of those fail"
    )
    attribution = attribution_line(arm)
    if attribution:
        lines.append(attribution)
    return lines


def auc_text(block: AucInterval | None) -> str:
    """`0.78 (0.70–0.86)`, or — when there is no AUC."""
    if block is None:
        return "—"
    return f"{block.auc:.2f} ({block.lower:.2f}–{block.upper:.2f})"


def certificate_line(arm: Arm) -> str | None:
    """How well the certificate tells the arm's cache-induced failures from the model's own."""
    c = arm.certificate_attribution
    if c is None:
        return None
    kinds = f"{c.cache_induced} cache-induced, {c.own} own"
    if c.unscored:
        kinds += f", {c.unscored} unscored"
    if c.certificate is None:
        return (
            f"certificate attribution: too few failures to tell apart ({kinds}; "
            f"at least {c.min_per_kind} of each needed)"
        )
    others = c.other_scores
    return (
        f"certificate attribution among the candidate's failures ({kinds}): AUC of the mean relative "
        f"bound (primary) {auc_text(c.certificate)}, of output confidence (−mean logprob) "
        f"{auc_text(c.output_confidence)}; beside them the bound's max "
        f"{auc_text(others.certificate_bound_max)} (the cap binds in {pct0(c.cap_share)} of "
        f"cells), its mean {auc_text(others.certificate_bound_mean)}, the mean relative estimate "
        f"{auc_text(others.certificate_relative_estimate_mean)}; {c.method} "
        f"{100 * c.confidence:g}% intervals, 0.5 is chance"
    )


def attribution_line(arm: Arm) -> str | None:
    a = arm.attribution
    if a is None:
        return None
    if a.classes is None:
        return f"attribution: not possible, parts not run as arms: {', '.join(a.missing_parts)}"
    order = [p.kind for p in a.parts] + ["both", "several", "interaction", "unattributed"]
    intervals: dict[str, ClassInterval] = {str(k): v for k, v in (a.intervals or {}).items()}

    def share(name: str) -> str:
        i = intervals.get(name)
        if not i or i.rate is None:
            return ""
        return f" ({pct(i.rate)}, {pct(i.lower)}–{pct(i.upper)})"

    present = [name for name in order if name in a.classes]
    classes = " · ".join(f"{name} {a.classes[name]}{share(name)}" for name in present)
    parts = " + ".join(f"{p.arm} ({p.kind})" for p in a.parts)
    conf = ""
    if intervals:
        conf = f"; rates of {a.control_passes} control passes, {pct(a.confidence)} intervals"
    return f"attribution of {a.failures} cache-induced failures to {parts}: {classes}{conf}"


def headline_slice(arm: Arm) -> Slice | None:
    """The slice a verdict line quotes: `all`."""
    return next((s for s in arm.slices if s.slice == "all"), None)


def cfr_summary(s: Slice | None) -> str:
    """`all` CFR k/n = x% (upper y%, τ z%)."""
    if s is None:
        return "no slices"
    counts = f"{s.cache_induced_failures}/{s.control_passes}"
    return f"CFR {counts} = {pct(s.cfr)} (upper {pct(s.cfr_upper)}, τ {pct(s.tau)})"


def verdict_parts(arm: Arm) -> tuple[str, str, str]:
    """(arm, "DECISION (exit n)", "CFR … · reason"): one arm's verdict line in three pieces."""
    return (
        arm.arm,
        f"{arm.decision.upper()} (exit {arm.exit_code})",
        f"{cfr_summary(headline_slice(arm))} · {arm.reason}",
    )


def verdict_line(arm: Arm) -> str:
    name, decision, rest = verdict_parts(arm)
    return f"{name}: {decision} · {rest}"


def holding_back(arm: Arm) -> list[str]:
    """Why an inconclusive arm is not decided: per gated slice that has not passed, what a verdict needs."""
    if arm.decision != "inconclusive":
        return []
    lines = []
    for s in arm.slices:
        if not s.gated or s.decision == "pass":
            continue
        counts = f"{s.cache_induced_failures}/{s.control_passes}"
        if s.cfr is None:
            need = "no control passes: nothing to gate on"
        elif s.clusters_needed() is not None:
            need = f"a PASS needs ≈{s.clusters_needed()} distinct clusters at this CFR (has {s.clusters})"
        elif s.passes_needed:
            need = f"a PASS needs ≈{s.passes_needed} control passes at this CFR (has {s.control_passes})"
        else:
            need = (
                f"CFR {pct(s.cfr)} ≥ τ {pct(s.tau)}: no number of cases passes it at this rate; "
                "a FAIL needs more failing cases"
            )
        lines.append(f"{s.slice} ({counts}): {need}")
    return lines


def short(value: Any, width: int) -> str:
    """A value on one line, cut to `width` characters with an ellipsis."""
    if value is None:
        return "—"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split()) or '""'
    return text if len(text) <= width else text[: width - 1] + "…"


def case_name(f: Failure) -> str:
    """A failing case as its record's own id where the workload has one (`req-17 [case 34240f…]`), with
    its slice labels."""
    labels = ", ".join(f"{k}={v}" for k, v in f.labels.items())
    source = f.source_id
    name = f"{source} [case {f.case_id}]" if source else f.case_id
    return f"{name} ({labels})" if labels else name


def example_fields(f: Failure, width: int) -> list[tuple[str, str]]:
    """One failing example as (label, value) pairs, values cut to `width`."""
    token = "—" if f.first_divergence is None else str(f.first_divergence)
    return [
        ("case", case_name(f)),
        ("prompt", short(f.prompt, width)),
        ("expected", short(f.expected, width)),
        ("control", short(f.control_output, width)),
        ("candidate", short(f.candidate_output, width)),
        ("validator", short(f.detail or f.fail_kind, width)),
        ("first divergent token", token),
    ]


def example_line(f: Failure, width: int = 40) -> str:
    """One failing example on one line."""
    fields = dict(example_fields(f, width))
    return (
        f"{fields['case']}: prompt {fields['prompt']} · expected {fields['expected']} · "
        f"control {fields['control']} · candidate {fields['candidate']} · {fields['validator']} · "
        f"diverges at token {fields['first divergent token']}"
    )


EXAMPLES = 5
"""Failing examples every format shows per arm (the HTML shows the rest folded; JSON has all)."""


def examples_heading(arm: Arm, shown: int) -> str:
    total = len(arm.failures)
    more = f" (first {shown}; all in --format json)" if total > shown else ""
    return f"{total} cache-induced failures{more}"


def ratio_text(value: float | None) -> str:
    return "—" if value is None else f"×{value:.2f}"


def seconds(value: float | None) -> str:
    """A duration to three significant figures: µs, ms below a second, s from one second up."""
    if value is None:
        return "—"
    if value < 1e-3:
        return f"{1e6 * value:.0f} µs"
    if value < 1:
        return f"{1000 * value:.1f} ms" if value < 0.1 else f"{1000 * value:.0f} ms"
    return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def timing_text(t: Timing) -> str:
    c, x, r = t.control, t.candidate, t.ratio
    return (
        f"median {seconds(x.median)} vs {seconds(c.median)} ({ratio_text(r.median)}) · "
        f"p95 {seconds(x.p95)} vs {seconds(c.p95)} ({ratio_text(r.p95)})"
    )


def gains_lines(arm: Arm) -> list[str]:
    """The proof that the arm's treatment ran (render.proof_text), the stress it ran under
    (render.stress_text), then what it buys against the control in the same run: KV kept, KV bytes,
    TTFT and latency."""
    lead = [line for line in (proof_line(arm), stress_line(arm)) if line]
    return lead if arm.gains is None else [*lead, *gains_text(arm.gains)]


def gains_text(g: Gains) -> list[str]:
    """What an arm buys against the control in the same run: KV kept, KV bytes, TTFT and latency."""
    kept = "not reported by the engine" if g.kv_kept is None else f"{pct(g.kv_kept)} of the control's"
    b, measured = g.kv_bytes, g.measured_kv_bytes
    if measured:
        kept += f" · KV bytes {pct(measured.share)} (engine-counted)"
    elif b:
        kept += (
            f" · KV bytes per token {pct(b.share)} ({b.bits}-bit entries, control {b.control_bits};"
            " from the spec)"
        )
    return [
        f"gains over {g.n_pairs} pairs: KV entries kept {kept}",
        f"TTFT vs control: {timing_text(g.ttft_s)}",
        f"latency vs control: {timing_text(g.latency_s)}",
    ]


def gains_line(arm: Arm) -> str | None:
    lines = gains_lines(arm)
    return " · ".join(lines) if lines else None


def gate_line(report: Report) -> str:
    return f"gate: {report.decision.upper()} (exit {report.exit_code})"
