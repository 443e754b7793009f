"""Lossless arms under load: token-identical to the control, or a defect.

Prefix reuse and offload (alone or composed only of each other) must not change a single output token.
Under load (a matrix's `concurrency` above 1, a `kv_blocks` pool that forces preemption, or a stress
schedule: aborts, interleaved namespaces, re-sends after churn, soak repeats; `engines/schedule.py`)
that is exactly what block-recycling and offload races break, so every case where such an arm's output
leaves the control's is a defect, named with the case, the first divergent token and the schedule it
ran under, whatever the validator says of the answer. The pass records (`server/*.json`) add what the
server and the schedules counted (`record.first_pass_counts`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvgate.engines.schedule import schedule_words
from kvgate.engines.server.record import SCHEDULE_COUNTS, first_pass_counts, read_records
from kvgate.rundir.manifest import read_manifest
from kvgate.rundir.store import read_results
from kvgate.treatments.matrix import Matrix, parse_matrix_text

MAX_LISTED = 20


def lossless(spec: dict[str, Any]) -> bool:
    """Whether the arm may not change outputs: prefix reuse and offload, nothing else."""
    parts = spec.get("of") or [spec]
    kinds = {p["kind"] for p in parts}
    prefix_only = all(p.get("mode", "prefix") == "prefix" for p in parts if p["kind"] == "reuse")
    return bool(kinds) and kinds <= {"reuse", "offload"} and prefix_only


def _matrix(manifest: dict[str, Any]) -> Matrix | None:
    text = manifest.get("matrix_text")
    return parse_matrix_text(text, manifest.get("matrix_name", "matrix"), "manifest matrix") if text else None


def lossless_defects(run_dir: Path) -> list[str]:
    """One sentence per divergent case of a lossless candidate run under load (at most MAX_LISTED per
    arm, then a count)."""
    manifest = read_manifest(run_dir)
    matrix = _matrix(manifest)
    if matrix is None:
        return []
    loaded = [t.name for t in matrix.candidates if lossless(t.to_dict()) and matrix.stressed(t.name)]
    if not loaded:
        return []
    columns = ["case_id", "arm", "replicate", "attempt", "fail_kind", "first_divergence", "output_token_ids"]
    rows = [
        r for r in read_results(run_dir, columns).to_pylist() if r["replicate"] == 0 and r["attempt"] == 0
    ]
    control = {r["case_id"]: r["output_token_ids"] for r in rows if r["arm"] == matrix.control.name}
    counts = first_pass_counts(run_dir)
    defects = []
    for arm in loaded:
        diverged = [r for r in rows if r["arm"] == arm and r["first_divergence"] is not None]
        load = schedule_words(matrix.load_for(arm), counts.get(arm))
        for row in diverged[:MAX_LISTED]:
            at = row["first_divergence"]
            ours, theirs = row["output_token_ids"], control.get(row["case_id"], [])
            tokens = f"control {_token(theirs, at)}, arm {_token(ours, at)}"
            defects.append(
                f"lossless arm {arm!r} diverged from the control on case {row['case_id']} at output token "
                f"{at} ({tokens}) under {load}"
            )
        if len(diverged) > MAX_LISTED:
            defects.append(f"lossless arm {arm!r}: {len(diverged) - MAX_LISTED} more divergent cases")
    return defects


def _token(tokens: list[int], at: int) -> str:
    return str(tokens[at]) if at < len(tokens) else "end"


def server_summary(run_dir: Path) -> list[str]:
    """Per arm of a served run: requests, retried cases, timeouts and preemptions (first passes)."""
    per_arm: dict[str, dict[str, Any]] = {}
    for record in read_records(run_dir):
        arm = f"{record['arm']}" + (f" (A/A replicate {record['replicate']})" if record["replicate"] else "")
        arm += f" rerun {record['attempt']}" if record["attempt"] else ""
        seen = per_arm.setdefault(
            arm,
            {"requests": 0, "retried": 0, "timeouts": 0, "preemptions": None, "load": record}
            | {key: 0 for key in ("aborts", *SCHEDULE_COUNTS)},
        )
        for key in ("aborts", *SCHEDULE_COUNTS):
            seen[key] += record.get(key, 0)
        seen["requests"] += record["requests"]
        seen["retried"] += len(record["retried"])
        seen["timeouts"] += record["timeouts"]
        if record["preemptions"] is not None:
            seen["preemptions"] = (seen["preemptions"] or 0) + record["preemptions"]
    lines = []
    for arm, seen in per_arm.items():
        load = seen["load"]
        blocks = f", kv_blocks {load['kv_blocks']}" if load["kv_blocks"] else ""
        pre = "not reported" if seen["preemptions"] is None else str(seen["preemptions"])
        lines.append(
            f"arm {arm!r} ({load['form']}, concurrency {load['concurrency']}{blocks}): {seen['requests']} "
            f"requests, preemptions {pre}, {seen['retried']} cases retried, {seen['timeouts']} timeouts"
            + (f", {seen['aborts']} aborted and sent again" if seen["aborts"] else "")
            + "".join(f", {seen[key]} {key.replace('_', ' ')}" for key in SCHEDULE_COUNTS if seen[key])
        )
    return lines
