"""One candidate arm's report: its slices, decision, re-run confirmation, confidence signal, where its
outputs diverge, CFR against context length, for composites attribution to the parts and, for arms
with an attention-error certificate, how well it tells cache-induced failures from the model's own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import kvgate.gate.decision as gd
from kvgate.gate.decision import EXIT_CODES
from kvgate.gate.policy import Policy
from kvgate.gate.procedure import arm_codes
from kvgate.report.analysis.attribution import attribution
from kvgate.report.analysis.certificate_attribution import certificate_attribution
from kvgate.report.analysis.context import by_context
from kvgate.report.analysis.divergence import divergence_summary
from kvgate.report.analysis.evidence import Evidence, gains, kv_bytes
from kvgate.report.analysis.run_data import ArmRows, CaseTable, RunRows
from kvgate.report.analysis.slice_stats import CaseSignals, slice_rows
from kvgate.report.analysis.slices import SliceGroup
from kvgate.stats.paired import CACHE_INDUCED, pair_outcomes
from kvgate.stats.tests import auc


def is_lossless(spec: dict[str, Any]) -> bool:
    """Whether an arm must not change any answer, so that every candidate-only failure is a defect:
    offload and prefix reuse (exact KV, moved or shared). Span reuse is an approximation by design
    (the reused span never attended to what precedes it, `engines/hf/span_reuse.py`), as are eviction
    and quantisation; a composite is lossless only if every part is."""
    parts = spec.get("of")
    if parts:
        return all(is_lossless(part) for part in parts)
    return spec["kind"] == "offload" or (spec["kind"] == "reuse" and spec.get("mode", "prefix") != "span")


@dataclass(frozen=True)
class ReportContext:
    """What every arm's report reads: the rows, the control, the A/A signal, slices and policy."""

    rows: RunRows
    manifest: dict[str, Any]
    control: ArmRows
    aa: np.ndarray
    groups: list[SliceGroup]
    context: SliceGroup | None
    prompt_tokens: np.ndarray
    policy: Policy
    broken: set[str]
    clusters: np.ndarray
    """Per case, its cluster code (analysis.slices.cluster_ids)."""
    selected: np.ndarray | None = None
    """Per case, whether the arm's verdict rests on it (a sequential look's cases); None: every case."""
    cases: CaseTable | None = None
    """The run's cases: failing examples and gains are reported only when given."""
    proofs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per candidate, its proof of treatment (analysis.proof); an arm without it is an error."""
    _evidence: dict[str, Evidence] = field(default_factory=dict, compare=False, repr=False)

    @property
    def evidence(self) -> Evidence | None:
        """The rows' extra columns (analysis.evidence), read once per run on first use."""
        if self.cases is None:
            return None
        if "run" not in self._evidence:
            path = self.manifest.get("workload_path")
            self._evidence["run"] = Evidence(self.rows.run_dir, self.cases, path, self.rows)
        return self._evidence["run"]


def _signals(ctx: ReportContext, name: str, outcomes: np.ndarray) -> CaseSignals:
    cio = outcomes == CACHE_INDUCED
    if ctx.manifest["matrix"].get("confirm_reruns", 0) <= 0:
        none = np.zeros_like(cio)
        return CaseSignals(outcomes, ctx.aa, none, none, cio, reruns_known=False)
    reruns = ctx.rows.reruns(name)
    flaky = cio & (reruns.passes > 0)
    reproducible = cio & (reruns.valid > 0) & (reruns.passes == 0)
    return CaseSignals(outcomes, ctx.aa, reproducible, flaky, cio & (reruns.valid == 0), reruns_known=True)


def _decision(
    name: str, ctx: ReportContext, slices: list[dict[str, Any]], noisy: bool, errors: int, missing: int
) -> tuple[str, str]:
    """The arm's decision (gate.procedure.arm_codes over its slices' final decisions), with data
    problems between: isolation contradicted → error; no proof that the treatment ran, engine errors or
    missing pairs → error unless a slice already fails."""
    control_name = ctx.manifest["matrix"]["control"]
    if control_name in ctx.broken:
        return "error", f"isolation counters contradict the control {control_name!r}"
    if name in ctx.broken:
        return "error", "isolation counters contradict the arm"
    codes = np.array([gd.NAMES.index(s["decision"]) for s in slices])
    gated = np.array([s["gated"] for s in slices], dtype=bool)
    code = int(arm_codes(codes, gated, np.array(noisy)))
    if code == gd.FAIL:
        failed = [s for s in slices if s["decision"] == "fail"]
        more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
        return "fail", "slice " + ", ".join(s["slice"] for s in failed[:3]) + more + " failed"
    proof = ctx.proofs.get(name)
    if proof is not None and proof["status"] == "missing":
        more = f" (and {len(proof['missing']) - 1} more)" if len(proof["missing"]) > 1 else ""
        first = proof["missing"][0].removeprefix(f"arm {name!r}: ")
        return "error", f"no proof of treatment: {first}{more}"
    if errors:
        return "error", f"{errors} cases ended in engine errors"
    if missing:
        return "error", f"{missing} cases have no result pair: the run is incomplete (resume it)"
    if noisy:
        floor = next(s for s in slices if s["slice"] == "all")
        return "inconclusive", (
            f"the A/A noise floor ({100 * (floor['aa_cfr'] or 0):.1f}% of control passes flip in the "
            f"replicate) is above τ {100 * floor['tau']:g}%: the engine's own noise exceeds the limit"
        )
    gated_slices = [s for s in slices if s["gated"]]
    first = next((s for s in gated_slices if s["decision"] != "pass"), gated_slices[0])
    where = "" if first["slice"] == "all" else f"slice {first['slice']}: "
    return gd.NAMES[code], where + first["reason"]


def _gains(
    evidence: Evidence, control: str, name: str, usable: np.ndarray, ctx: ReportContext, spec: dict[str, Any]
) -> dict[str, Any]:
    """What the arm buys against the control (analysis.evidence): KV entries and bytes, TTFT, latency."""
    out = gains(evidence.arm(control), evidence.arm(name), usable)
    engine = ctx.manifest.get("engine") or {}
    out["kv_bytes"] = kv_bytes(out["kv_kept"], spec, engine.get("dtype"), out["measured_kv_bytes"])
    return out


def arm_report(name: str, ctx: ReportContext) -> dict[str, Any]:
    spec = ctx.manifest["arms"][name]["spec"]
    cand = ctx.rows.arm_rows(name)
    control = ctx.control
    selected = np.ones(control.present.shape, dtype=bool) if ctx.selected is None else ctx.selected
    both = control.present & cand.present & selected
    usable = both & ~control.error & ~cand.error
    errors = int(np.count_nonzero(both & (control.error | cand.error)))
    missing = int(np.count_nonzero(selected & ~both))
    outcomes = pair_outcomes(control.passed, cand.passed, usable)
    signals = _signals(ctx, name, outcomes)
    lossless = is_lossless(spec)
    why_critical = "a lossless arm (offload and prefix reuse must not change answers)" if lossless else None
    slices, noisy = slice_rows(name, ctx.groups, signals, ctx.policy, why_critical, ctx.clusters)
    decision, reason = _decision(name, ctx, slices, noisy, errors, missing)
    scored = usable & np.isfinite(cand.mean_logprob)
    failed = ~cand.passed
    cio = outcomes == CACHE_INDUCED
    evidence = ctx.evidence
    control_name = ctx.manifest["matrix"]["control"]
    return {
        "arm": name,
        "kind": spec["kind"],
        "spec": spec,
        "decision": decision,
        "exit_code": EXIT_CODES[decision],
        "reason": reason,
        "n_cases": int(control.present.size),
        "engine_errors": errors,
        "missing_pairs": missing,
        "lossless": lossless,
        "confirm_reruns": int(ctx.manifest["matrix"].get("confirm_reruns", 0)),
        "reproducible_failures": int(signals.reproducible.sum()) if signals.reruns_known else None,
        "flaky_failures": int(signals.flaky.sum()) if signals.reruns_known else None,
        "unconfirmed_failures": int(signals.unconfirmed.sum()),
        "confidence_auc": auc(-cand.mean_logprob[scored], failed[scored]),
        "confidence_auc_n": {
            "failures": int(np.count_nonzero(scored & failed)),
            "passes": int(np.count_nonzero(scored & ~failed)),
        },
        "certificate_attribution": certificate_attribution(cand, control, usable, ctx.policy.confidence),
        "divergence": divergence_summary(cand.first_divergence[usable], failed[usable]),
        "by_context": by_context(ctx.context, ctx.prompt_tokens, outcomes, ctx.policy.confidence),
        "attribution": attribution(
            spec,
            ctx.manifest["arms"],
            cio,
            ctx.rows.arm_rows,
            control.usable & control.passed & usable,
            ctx.policy.confidence,
        ),
        "slices": slices,
        "failures": [] if evidence is None else evidence.failures(control_name, name, cio),
        "gains": None if evidence is None else _gains(evidence, control_name, name, usable, ctx, spec),
        "proof": ctx.proofs.get(name),
    }
