"""The report model: the machine-readable truth every renderer reads (docs/reference.md, "Report JSON").

Pairs each candidate's first attempt with the control's (replicate 0) by case, counts per slice, bounds
the CFR, applies the gate (`gate.procedure`), measures the A/A noise floor and checks the isolation
counters and each arm's proof of treatment. An arm's decision: error when isolation counters contradict
it or the control; else fail when any slice fails; else error when nothing shows its treatment ran
(analysis.proof), or cases ended in engine errors or lack a result; else inconclusive when
the A/A noise floor is above τ; else pass when every gated slice passes (`all`, `critical`, and every
slice the policy names), inconclusive otherwise. The run's decision combines the arms' (any fail →
fail, else error, else inconclusive, else pass), and its exit code is what CI branches on.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError

from kvgate import __version__
from kvgate.errors import BadInput
from kvgate.gate.decision import EXIT_CODES, combine
from kvgate.gate.feasibility import check_safe
from kvgate.gate.policy import Policy, parse_policy
from kvgate.gate.policy_diff import TEXT_ONLY, changed_settings
from kvgate.gate.policy_slices import check_policy_columns
from kvgate.report.analysis.arm import ReportContext, arm_report
from kvgate.report.analysis.context import context_group
from kvgate.report.analysis.noise import aa_flips, isolation_checks, noise_floor
from kvgate.report.analysis.numbers import ratio
from kvgate.report.analysis.proof import treatment_proofs
from kvgate.report.analysis.run_data import RunRows, read_cases
from kvgate.report.analysis.sequential import schedule, sequential_arm_report
from kvgate.report.analysis.slices import cluster_ids, slice_groups
from kvgate.report.analysis.stress import stress_reports, with_boundaries
from kvgate.report.document.report import SCHEMA, Report
from kvgate.report.schema import ReportShapeError, shape_errors
from kvgate.rundir.manifest import read_manifest

if TYPE_CHECKING:
    from kvgate.rundir.integrity import PartCheck

PROVENANCE = (
    "run_id", "created_at", "workload_sha256", "tokenizer", "model", "engine", "engine_options",
    "matrix_name", "n_cases", "limit", "policy_sha256", "git_commit",
)  # fmt: skip


@dataclass(frozen=True)
class PolicyChange:
    """The policy a report gates on instead of the run's declared one (all None: the declared one).
    `text`: the new policy's TOML; `reason`: why it changed (required when it does); `unsafe_reason`:
    why it may run although unsafe (gate.feasibility); `source`: where the text came from, for its
    errors (the file's path)."""

    text: str | None = None
    reason: str | None = None
    unsafe_reason: str | None = None
    source: str = "--policy"


DECLARED = PolicyChange()


def resolve_policy(
    manifest: dict[str, Any], change: PolicyChange = DECLARED
) -> tuple[Policy, str | None, str | None]:
    """The manifest's policy, or a new one only when a reason for the change is given; and the reason
    stored (or given) for running on an unsafe policy."""
    declared = parse_policy(manifest["policy_text"], "the run's declared policy")
    stored_unsafe = manifest.get("policy_unsafe_reason")
    if change.text is None or change.text == manifest["policy_text"]:
        return declared, None, stored_unsafe
    policy = parse_policy(change.text, change.source)
    reason = change.reason
    if not reason or not reason.strip():
        raise BadInput(
            "the policy differs from the one declared before the run in "
            f"{', '.join(changed_settings(declared, policy)) or TEXT_ONLY}; "
            "pass --policy-changed-reason TEXT to gate on it anyway"
        )
    return policy, reason.strip(), check_safe(policy, change.unsafe_reason)


WITHIN_CLUSTERS = {
    "estimate": "the ICC bounded from the run (Berger–Boos)",
    "per_case": "independent cases (ICC 0, declared)",
    "per_cluster": "whole-cluster defects (ICC 1, declared)",
}


def procedure_text(policy: Policy) -> str:
    """Which procedure decides, in words (docs/gate.md): the tests, the family, and the sequential mode."""
    if policy.rule == "point":
        return "point estimate against τ on the gated slices (no error control)"
    if policy.anytime:
        tests = "anytime-valid mixture e-values of each slice (independent cases), every look at full α"
    else:
        tests = (
            "exact tails of each slice's failure count over its clusters, at "
            + WITHIN_CLUSTERS[policy.defects]
        )
        if policy.defects == "estimate":
            tests += " for PASS; FAIL: the single cases' exact tail over the clusters' betting e-value"
        if policy.sequential:
            tests += f"; α spent over looks every {policy.look_every} cases (ρ = {policy.spending_power:g})"
    strata = f", every value of {', '.join(policy.strata)}" if policy.strata else ""
    return (
        f"{tests}; weighted Holm over every slice that can reach α (gates — all, critical, named slices"
        f"{strata} — 1 − signal_alpha, signals signal_alpha, a rejected slice's weight passed on); PASS "
        "needs every gate's exact upper bound ≤ τ; a FAIL also needs the candidate worse than the A/A "
        f"replicate on the same control passes (paired unconditional exact test at aa_alpha = "
        f"{policy.aa_alpha:g}); signals flagged at BH q ≤ α"
    )


def policy_block(
    policy: Policy, declared_sha: str, changed: str | None, unsafe_reason: str | None, cluster: str
) -> dict[str, Any]:
    return {
        "tau": policy.tau,
        "confidence": policy.confidence,
        "alpha": policy.alpha,
        "rule": policy.rule,
        "min_control_passes": policy.min_control_passes,
        "critical": list(policy.critical),
        "slice_tau": dict(policy.slice_tau),
        "signal_alpha": policy.signal_alpha,
        "aa_margin": policy.aa_margin,
        "cluster": cluster,
        "defects": policy.defects,
        "strata": list(policy.strata),
        "allow_unwinnable": policy.allow_unwinnable,
        "procedure": procedure_text(policy),
        "unsafe": policy.unsafe,
        "unsafe_reason": unsafe_reason,
        "sha256": policy.sha256,
        "declared_sha256": declared_sha,
        "changed_reason": changed,
    }


def build_report(run_dir: Path, change: PolicyChange = DECLARED) -> Report:
    """The report of the run in `run_dir`, gated on its declared policy (or a changed one, with a reason)."""
    return verified_report(run_dir, change)[0]


def verified_report(run_dir: Path, change: PolicyChange = DECLARED) -> tuple[Report, RunRows]:
    """`build_report`, and the rows it was built from (their counters feed the isolation check)."""
    manifest = read_manifest(run_dir)
    from kvgate.rundir.integrity import verify_run

    check = verify_run(run_dir, manifest, parts=False)  # each part checked as RunRows reads it
    return report_and_rows(run_dir, manifest, change, check=check)


def report_and_rows(
    run_dir: Path,
    manifest: dict[str, Any],
    change: PolicyChange = DECLARED,
    evidence: bool = True,
    check: PartCheck | None = None,
) -> tuple[Report, RunRows]:
    """The report from a manifest already read (and the run verified, or written by this process), and
    the rows it read (each part checked by `check` as it is read, when given). `evidence`: read failing
    examples and gains (False: the decisions alone, as a sequential run's looks need them)."""
    policy, changed, unsafe_reason = resolve_policy(manifest, change)
    cases = read_cases(manifest)
    if changed is not None:  # the declared policy was checked so before the run
        check_policy_columns(policy, cases.slice_columns, f"run {manifest['run_id']}")
    control_name = manifest["matrix"]["control"]
    rows = RunRows(run_dir, cases, list(manifest["arms"]), check, control_name if evidence else None)
    control = rows.arm_rows(control_name)
    replicate = rows.arm_rows(control_name, 1) if rows.has_replicate(control_name, 1) else None
    groups, notes = slice_groups(cases, policy)
    clusters, cluster_name = cluster_ids(cases, policy)
    notes += cluster_notes(cases.n, clusters, cluster_name)
    if policy.unsafe:
        notes.append(f"unsafe policy ({'; '.join(policy.unsafe)}): {unsafe_reason or 'no reason stored'}")
    prompt_tokens = np.where(cases.n_prompt_tokens > 0, cases.n_prompt_tokens, control.n_prompt_tokens)
    isolation = isolation_checks(rows, manifest["arms"])
    ctx = ReportContext(
        rows=rows,
        manifest=manifest,
        control=control,
        aa=aa_flips(control, replicate),
        groups=groups,
        context=context_group(cases, prompt_tokens),
        prompt_tokens=prompt_tokens,
        policy=policy,
        broken={i.arm for i in isolation if not i.ok},
        clusters=clusters,
        cases=cases if evidence else None,
        proofs=treatment_proofs(run_dir, manifest, rows.columns),
    )
    candidates = manifest["matrix"]["candidates"]
    if policy.sequential:
        looks = schedule(groups, policy, cases.n, manifest["run_id"])
        arms = [sequential_arm_report(name, ctx, looks) for name in candidates]
    else:
        arms = [arm_report(name, ctx) for name in candidates]
    stress = stress_reports(run_dir, manifest)
    for arm in arms:
        arm["stress"] = with_boundaries(stress.get(arm["arm"]), cases, partial(rows.arm_rows, arm["arm"]))
    overall = combine(a["decision"] for a in arms)
    n_control = int(control.present.sum())
    passes = int((control.usable & control.passed).sum())
    report = {
        "schema": SCHEMA,
        "kvgate_version": __version__,
        "run": {k: manifest.get(k) for k in PROVENANCE}
        | {"kvgate_version": manifest.get("kvgate_version")}
        | ({"stack_version": manifest["stack_version"]} if manifest.get("stack_version") else {}),
        "policy": policy_block(policy, manifest["policy_sha256"], changed, unsafe_reason, cluster_name),
        "slice_columns": list(cases.slice_columns),
        "control": {
            "arm": control_name,
            "n": n_control,
            "passes": passes,
            "engine_errors": int((control.present & control.error).sum()),
            "pass_rate": ratio(passes, int(control.usable.sum())),
            "stress": with_boundaries(stress.get(control_name), cases, lambda: control),
        },
        "noise_floor": noise_floor(control, replicate, policy.confidence),
        "isolation": isolation,
        "notes": notes,
        "arms": arms,
        "decision": overall,
        "exit_code": EXIT_CODES[overall],
    }
    return typed(report), rows


def typed(report: dict[str, Any]) -> Report:
    """The report built as JSON-shaped values, read into its model (report.document): a value the model
    refuses is kvgate's bug, an internal error naming where (report.schema.ReportShapeError)."""
    try:
        return Report.model_validate(report)
    except ValidationError as exc:
        raise ReportShapeError("the report does not fit its schema: " + shape_errors(exc)) from None


def cluster_notes(n_cases: int, clusters: np.ndarray, name: str) -> list[str]:
    """A note when cases share clusters: each slice is tested over its clusters (gate.tails)."""
    distinct = int(np.unique(clusters).size)
    if distinct >= n_cases:
        return []
    return [
        f"{n_cases} cases in {distinct} clusters by {name}: each slice's failures are tested on their exact "
        "distribution over its clusters, at the within-cluster correlation its row's icc_upper gives "
        "(1: whole clusters, the worst case); while it stays high, a PASS needs more clusters, not more cases"
    ]
