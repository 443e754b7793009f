"""A fixed run with known outcomes, written straight into the store layout (no engine).

48 cases: 0–23 `passkey`, 24–47 `needle`; even cases in ctx_bucket 512 (500 prompt tokens), odd in 1k
(1000); depth_bucket start/end alternating in pairs; cases 0–5 marked critical. The sets below say
which case fails where; the tests recompute every number of the report from them by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvgate.gate.policy import parse_policy
from kvgate.rundir.manifest import build_manifest, write_manifest
from kvgate.rundir.store import write_part
from kvgate.treatments.matrix import parse_matrix
from kvgate.workload.case import Case
from kvgate.workload.schema import read_workload, write_workload

N = 48
CONTROL = "full"
ARMS = ["snapkv-50", "fp8-e4m3", "snapkv-50+fp8", "offload-host", "prefix-reuse"]
CONTROL_FAILS = {46, 47}
CONTROL_ERRORS: set[int] = set()
AA_FLIPS_TO_FAIL = {10}
AA_FLIPS_TO_PASS = {46}
FAILS = {
    "snapkv-50": {0, 1, 2, 3, 30, 46},
    "fp8-e4m3": {20, 30, 33, 46},
    "snapkv-50+fp8": {1, 3, 20, 30, 40, 41},
    "offload-host": {47},
    "prefix-reuse": set(),
}
ERRORS: dict[str, set[int]] = {"prefix-reuse": {7}}
RERUNS: dict[
    str, dict[int, bool | None]
] = {  # arm → case → verdict of its one re-run: True pass, False fail, None engine error
    "snapkv-50": {0: True, 1: False, 2: None, 30: False},
    "fp8-e4m3": {20: True, 30: False},
}
LOW_CONFIDENCE_PASS = {"snapkv-50": 10}
KEEP = {"snapkv-50": 0.5, "snapkv-50+fp8": 0.5, "streaming-50-cert": 0.5}
"""Share of the prompt's KV entries each arm keeps (the rest keep all)."""
FP8 = {"fp8-e4m3", "snapkv-50+fp8"}
"""Arms whose engine counters show FP8 KV: every kept entry quantised, one byte per element."""
BYTES_PER_ENTRY = 23040
"""KV bytes per cached position of the control (bfloat16); FP8 arms count half."""
SPEED = {"snapkv-50": 0.8, "fp8-e4m3": 0.9, "snapkv-50+fp8": 0.75, "offload-host": 1.3, "prefix-reuse": 0.5}
"""Each arm's TTFT and latency as a multiple of the control's."""
"""A case the arm passes with a low mean logprob (−3.0), so the confidence AUC is not trivially 1."""

MATRIX = f"""[matrix]
control = "{CONTROL}"
candidates = {ARMS!r}
aa_replicate = true
confirm_reruns = 1
""".replace("'", '"')
POLICY = """tau = 0.1
confidence = 0.9
rule = "upper_bound"
min_control_passes = 10
holm = false
critical = ["task=passkey"]
signal_alpha = 0.2
strata = []
[slice_tau]
"ctx_bucket=1k" = 0.2
"""


def task(i: int) -> str:
    return "passkey" if i < 24 else "needle"


def ctx(i: int) -> str:
    return "512" if i % 2 == 0 else "1k"


def depth(i: int) -> str:
    return "start" if (i // 2) % 2 == 0 else "end"


def case_id(i: int) -> str:
    return f"case-{i:02d}"


def cases() -> list[Case]:
    return [
        Case(
            case_id=case_id(i),
            suite="fixed",
            task=task(i),
            messages=({"role": "user", "content": f"question {i}"},),
            max_new_tokens=8,
            validator="substring_all",
            expected=f"answer {i}",
            validator_args={},
            prefix_group=None,
            critical=i < 6,
            slices={"ctx_bucket": ctx(i), "depth_bucket": depth(i)},
            n_prompt_tokens=500 if i % 2 == 0 else 1000,
        )
        for i in range(N)
    ]


def row(
    i: int, arm: str, passed: bool | None, replicate: int = 0, attempt: int = 0, **extra: Any
) -> dict[str, Any]:
    """A result row; passed None means an engine error. Timings: the control's, times the arm's SPEED."""
    error = passed is None
    prompt = 500 if i % 2 == 0 else 1000
    speed = SPEED.get(arm, 1.0)
    kept = 0 if error else int(prompt * KEEP.get(arm, 1.0))
    fp8 = arm in FP8
    blocks = -(-kept // 16) if arm == "offload-host" else 0
    return {
        "case_id": case_id(i),
        "arm": arm,
        "replicate": replicate,
        "attempt": attempt,
        "output_text": "" if error else (f"answer {i}" if passed else f"answer {i + 100}"),
        "output_token_ids": [],
        "passed": bool(passed),
        "fail_kind": "engine_error" if error else (None if passed else "mismatch"),
        "detail": "engine failed" if error else ("" if passed else f"missing 'answer {i}'"),
        "n_prompt_tokens": prompt,
        "n_cached_tokens": 0,
        "n_kv_entries_kept": kept,
        "ttft_s": 0.0 if error else round(speed * (0.04 + 0.001 * (i % 10)), 6),
        "latency_s": 0.0 if error else round(speed * (0.3 + 0.01 * (i % 10)), 6),
        "mean_logprob": None if error else (-0.5 if passed else -2.0),
        "min_logprob": None,
        "first_divergence": None if (error or passed) else i % 5,
        "kv_bytes": kept * BYTES_PER_ENTRY // (2 if fp8 else 1),
        "kv_dtype": "fp8_e4m3" if fp8 else "bfloat16",
        "n_kv_quantized": kept if fp8 else 0,
        "n_tier_written": blocks,
        "n_tier_read": blocks,
        "n_spans_reused": 0,
    } | extra


def control_rows(replicate: int, errors: set[int]) -> list[dict[str, Any]]:
    rows = []
    for i in range(N):
        passed: bool | None = i not in CONTROL_FAILS
        if i in errors:
            passed = None
        if replicate == 1 and i in AA_FLIPS_TO_FAIL:
            passed = False
        if replicate == 1 and i in AA_FLIPS_TO_PASS:
            passed = True
        r = row(i, CONTROL, passed, replicate)
        r["first_divergence"] = 3 if replicate == 1 and i in AA_FLIPS_TO_FAIL else None
        rows.append(r)
    return rows


def candidate_rows(arm: str, fails: set[int]) -> list[dict[str, Any]]:
    rows = []
    for i in range(N):
        passed = None if i in ERRORS.get(arm, set()) else i not in fails
        extra: dict[str, Any] = {"n_cached_tokens": 64} if arm == "prefix-reuse" else {}
        if LOW_CONFIDENCE_PASS.get(arm) == i:
            extra |= {"mean_logprob": -3.0, "first_divergence": 7}
        rows.append(row(i, arm, passed, **extra))
    for i, verdict in RERUNS.get(arm, {}).items():
        rows.append(row(i, arm, verdict, attempt=1))
    return rows


def make_fixed_run(
    root: Path,
    policy_text: str = POLICY,
    control_errors: set[int] = CONTROL_ERRORS,
    fails: dict[str, set[int]] | None = None,
    control_cached: int = 0,
) -> Path:
    """Write the workload, the manifest and every result part; returns the run directory.

    Variants: `control_errors` (control cases that end in an engine error), `fails` (per-arm failures
    replacing FAILS), `control_cached` (cached tokens the control reports: an isolation breach).
    """
    fails = FAILS | (fails or {})
    root.mkdir(parents=True, exist_ok=True)
    workload_path = root / "fixed.parquet"
    write_workload(cases(), workload_path, {"suite": "fixed"})
    matrix_path = root / "fixed-matrix.toml"
    matrix_path.write_text(MATRIX)
    workload = read_workload(workload_path)
    manifest = build_manifest(
        workload=workload,
        case_ids=[c.case_id for c in workload.cases],
        model={"name": "fixed-model"},
        engine={"engine": "fake", "version": "1"},
        matrix=parse_matrix(matrix_path),
        policy=parse_policy(policy_text, "fixed policy"),
    )
    manifest["git_commit"] = "0" * 40
    run_dir = root / "runs" / manifest["run_id"]
    run_dir.mkdir(parents=True)
    write_manifest(run_dir, manifest)
    control = control_rows(0, control_errors)
    for r in control:
        r["n_cached_tokens"] = control_cached
    write_part(run_dir, CONTROL, control)
    write_part(run_dir, CONTROL, control_rows(1, set()))
    for arm in ARMS:
        write_part(run_dir, arm, candidate_rows(arm, fails[arm]))
    return run_dir
