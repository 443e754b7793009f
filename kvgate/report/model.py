"""The report model: the machine-readable truth every renderer reads (DESIGN.md, "Report JSON").

Pairs each candidate row with the control's row by case_id (replicate 0, first attempt), counts per
slice, bounds the CFR, applies the gate, measures the A/A noise floor and checks isolation counters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kvgate import __version__
from kvgate.errors import BadInput
from kvgate.gate.decision import EXIT_CODES, combine, slice_decision
from kvgate.gate.policy import Policy, parse_policy
from kvgate.runner.manifest import read_manifest
from kvgate.runner.store import read_results
from kvgate.stats.intervals import cp_lower, cp_upper
from kvgate.stats.paired import paired_counts
from kvgate.stats.tests import auc, holm, mcnemar_exact
from kvgate.workload.schema import read_workload

ALL = "all"
ROW_COLUMNS = [
    "case_id", "arm", "replicate", "attempt", "passed", "fail_kind", "n_cached_tokens",
    "mean_logprob", "first_divergence", "n_prompt_tokens",
]  # fmt: skip


def resolve_policy(manifest: dict[str, Any], policy_text: str | None, reason: str | None) -> tuple[Policy, str | None]:
    """The manifest's policy, or a new one only when a reason for the change is given."""
    declared = parse_policy(manifest["policy_text"], "the run's declared policy")
    if policy_text is None or policy_text == manifest["policy_text"]:
        return declared, None
    if not reason:
        raise BadInput(
            "the policy differs from the one declared before the run; "
            "pass --policy-changed-reason TEXT to gate on it anyway"
        )
    return parse_policy(policy_text, "--policy"), reason


def slice_frame(run_dir: Path, manifest: dict[str, Any]) -> tuple[pd.DataFrame, list[str]]:
    """One row per case with its slice labels (from the workload the run used)."""
    path = manifest.get("workload_path")
    if not path:
        raise BadInput(f"{run_dir}: the manifest names no workload")
    workload = read_workload(Path(path))
    if workload.sha256 != manifest["workload_sha256"]:
        raise BadInput(f"workload {path} changed since run {manifest['run_id']}")
    columns = list(workload.slice_columns)
    rows = [
        {"case_id": c.case_id, "critical": c.critical, **{k: (c.task if k == "task" else c.slices.get(k)) for k in columns}}
        for c in workload.cases
    ]
    return pd.DataFrame(rows), columns


def build_report(
    run_dir: Path, policy_text: str | None = None, policy_changed_reason: str | None = None
) -> dict[str, Any]:
    manifest = read_manifest(run_dir)
    policy, changed = resolve_policy(manifest, policy_text, policy_changed_reason)
    rows = read_results(run_dir, ROW_COLUMNS).to_pandas()
    cases, slice_columns = slice_frame(run_dir, manifest)
    control_name = manifest["matrix"]["control"]
    first = rows[(rows["replicate"] == 0) & (rows["attempt"] == 0)]
    control = first[first["arm"] == control_name].set_index("case_id")

    isolation = isolation_checks(rows, manifest)
    broken = {i["arm"] for i in isolation if not i["ok"]}
    arms = []
    for candidate in manifest["matrix"]["candidates"]:
        cand = first[first["arm"] == candidate].set_index("case_id")
        reruns = rows[(rows["arm"] == candidate) & (rows["attempt"] > 0)]
        arms.append(arm_report(candidate, manifest, control, cand, reruns, cases, slice_columns, policy, broken))
    overall = combine(a["decision"] for a in arms)
    return {
        "kvgate_version": __version__,
        "run": {
            k: manifest.get(k)
            for k in ("run_id", "workload_sha256", "model", "engine", "n_cases", "policy_sha256", "git_commit")
        },
        "policy": {
            "tau": policy.tau,
            "confidence": policy.confidence,
            "rule": policy.rule,
            "min_control_passes": policy.min_control_passes,
            "holm": policy.holm,
            "critical": list(policy.critical),
            "slice_tau": policy.slice_tau,
            "sha256": policy.sha256,
            "changed_reason": changed,
        },
        "control": {"arm": control_name, "n": len(control), "passes": int(control["passed"].sum())},
        "noise_floor": noise_floor(rows, control_name, control),
        "isolation": isolation,
        "arms": arms,
        "decision": overall,
        "exit_code": EXIT_CODES[overall],
    }


def noise_floor(rows: pd.DataFrame, control_name: str, control: pd.DataFrame) -> dict[str, Any] | None:
    """A/A: how often the control's replicate flips the control's pass/fail verdict."""
    replicate = rows[(rows["arm"] == control_name) & (rows["replicate"] == 1) & (rows["attempt"] == 0)]
    if replicate.empty:
        return None
    joined = control[["passed"]].join(replicate.set_index("case_id")[["passed", "first_divergence"]], rsuffix="_aa", how="inner")
    flips = int((joined["passed"] != joined["passed_aa"]).sum())
    diverged = int(joined["first_divergence"].notna().sum())
    n = len(joined)
    return {
        "n_pairs": n,
        "flips": flips,
        "flip_rate": flips / n if n else None,
        "token_divergences": diverged,
    }


def isolation_checks(rows: pd.DataFrame, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Verify cache counters against each arm: no hits outside reuse arms; hits on reuse arms."""
    checks = []
    for arm, info in manifest["arms"].items():
        kinds = [info["spec"]["kind"]] + [p["kind"] for p in info["spec"].get("of", [])]
        mine = rows[rows["arm"] == arm]
        if mine.empty:
            continue
        hits = int((mine["n_cached_tokens"] > 0).sum())
        if "reuse" in kinds:
            ok, detail = hits > 0, f"{hits} of {len(mine)} cases reused cached tokens"
            if not ok:
                detail = "a reuse arm reported no cache hits: reuse never happened"
        else:
            ok = hits == 0
            detail = "no cache hits" if ok else f"{hits} cases reported cache hits in an arm that may not reuse"
        checks.append({"arm": arm, "ok": ok, "cache_hit_cases": hits, "detail": detail})
    return checks


def arm_report(
    name: str,
    manifest: dict[str, Any],
    control: pd.DataFrame,
    cand: pd.DataFrame,
    reruns: pd.DataFrame,
    cases: pd.DataFrame,
    slice_columns: list[str],
    policy: Policy,
    broken: set[str],
) -> dict[str, Any]:
    joined = control[["passed", "fail_kind"]].join(
        cand[["passed", "fail_kind", "mean_logprob", "first_divergence"]], rsuffix="_cand", how="inner"
    )
    joined = joined.join(cases.set_index("case_id"), how="left")
    errors = (joined["fail_kind"] == "engine_error") | (joined["fail_kind_cand"] == "engine_error")
    n_errors = int(errors.sum())
    pairs = joined[~errors]
    cio = pairs["passed"] & ~pairs["passed_cand"]
    reproducible: set[str] | None = None
    flaky: set[str] = set()
    if manifest["matrix"]["confirm_reruns"] > 0:
        still_fails = reruns.groupby("case_id")["passed"].agg(lambda s: not s.any())
        reproducible = {c for c in pairs.index[cio] if bool(still_fails.get(c, True))}
        flaky = set(pairs.index[cio]) - reproducible

    slices = [slice_entry(name, ALL, pairs, policy, reproducible)]
    for col in slice_columns:
        for value, group in pairs.groupby(col, dropna=True, sort=True):
            slices.append(slice_entry(name, f"{col}={value}", group, policy, reproducible))
    if "task" in slice_columns and "ctx_bucket" in slice_columns:
        for (task, ctx), group in pairs.groupby(["task", "ctx_bucket"], dropna=True, sort=True):
            slices.append(slice_entry(name, f"task={task}/ctx_bucket={ctx}", group, policy, reproducible))
    critical_cases = pairs[pairs["critical"].fillna(False).astype(bool)]
    if not critical_cases.empty:
        slices.append(slice_entry(name, "critical", critical_cases, policy, reproducible))
    if policy.holm:
        adjusted = holm([s["mcnemar_p"] for s in slices])
        for s, p in zip(slices, adjusted, strict=True):
            s["mcnemar_p_holm"] = p

    failed_any = [s for s in slices if s["decision"] == "fail"]
    overall = slices[0]["decision"]
    if name in broken:
        decision, reason = "error", "isolation counters contradict the arm"
    elif failed_any:
        decision, reason = "fail", "slice " + ", ".join(s["slice"] for s in failed_any[:3]) + " failed"
    elif n_errors:
        decision, reason = "error", f"{n_errors} cases ended in engine errors"
    else:
        decision, reason = overall, slices[0]["reason"]
    logprob = pairs["mean_logprob"].astype(float)
    usable = logprob.notna()
    spec = manifest["arms"][name]["spec"]
    return {
        "arm": name,
        "kind": spec["kind"],
        "spec": spec,
        "decision": decision,
        "reason": reason,
        "engine_errors": n_errors,
        "reproducible_failures": None if reproducible is None else len(reproducible),
        "flaky_failures": len(flaky),
        "confidence_auc": auc(list(-logprob[usable]), list(~pairs["passed_cand"][usable].astype(bool))),
        "first_divergence": [int(v) for v in pairs["first_divergence"].dropna()],
        "slices": slices,
    }


def slice_entry(
    arm: str, name: str, pairs: pd.DataFrame, policy: Policy, reproducible: set[str] | None
) -> dict[str, Any]:
    """Counts, bounds and decision of one slice. `reproducible`: confirmed failures, None if no re-runs."""
    counts = paired_counts(np.asarray(pairs["passed"], bool), np.asarray(pairs["passed_cand"], bool))
    tau = policy.tau_for(name)
    k, n = counts.cache_induced_failures, counts.control_passes
    decision, reason = slice_decision(k, n, tau, policy)
    if name == "critical" or name in policy.critical:
        cio = pairs.index[pairs["passed"] & ~pairs["passed_cand"]]
        hard = list(cio) if reproducible is None else [c for c in cio if c in reproducible]
        if hard:
            decision, reason = "fail", f"{len(hard)} candidate-only failures in a critical slice"
    return {
        "arm": arm,
        "slice": name,
        "n_pairs": counts.n_pairs,
        "control_passes": n,
        "cache_induced_failures": k,
        "candidate_only_passes": counts.candidate_only_passes,
        "both_fail": counts.both_fail,
        "cfr": counts.cfr,
        "cfr_upper": cp_upper(k, n, policy.confidence),
        "cfr_lower": cp_lower(k, n, policy.confidence),
        "tau": tau,
        "decision": decision,
        "reason": reason,
        "mcnemar_p": mcnemar_exact(counts.cache_induced_failures, counts.candidate_only_passes),
        "total_failure_rate": counts.total_failure_rate,
    }
