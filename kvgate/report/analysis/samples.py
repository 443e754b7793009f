"""Per-sample log: one JSON line per (candidate arm, case) pair of a run, as lm-eval's --log_samples is
for its tasks: what to grep, diff or load when a failure needs tracing back.

Each line: `arm`, `control_arm`, `case_id`, `source_id` (the trace or data set record's own id, or
null), `labels` (the case's slices), `prompt` (the start of its last user message), `expected`, then
`control` and `candidate`, each with its `output`, `passed`, `fail_kind` and validator `detail`, and
the pair's `outcome` (`both_pass`, `cache_induced`, `candidate_only_pass`, `both_fail`, or `no_pair`
where either arm has no verdict: an engine error or a missing row) and `first_divergence` (the first
output token where the candidate leaves the control). First attempts of replicate 0 only, as the gate
counts them; lines in the matrix's candidate order, then case order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from kvgate.report.analysis.evidence import TEXT, Evidence, prompt_snippet
from kvgate.report.analysis.run_data import CaseTable, RunRows
from kvgate.stats.paired import BOTH_FAIL, BOTH_PASS, CACHE_INDUCED, CANDIDATE_ONLY_PASS, pair_outcomes
from kvgate.workload.case import SOURCE_ID

OUTCOMES = {
    BOTH_PASS: "both_pass",
    CACHE_INDUCED: "cache_induced",
    CANDIDATE_ONLY_PASS: "candidate_only_pass",
    BOTH_FAIL: "both_fail",
}
NO_PAIR_NAME = "no_pair"


def _side(arm_passed: bool, present: bool, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "output": row["output_text"],
        "passed": bool(arm_passed) if present else None,
        "fail_kind": row["fail_kind"],
        "detail": row["detail"],
    }


def sample_records(manifest: dict[str, Any], cases: CaseTable, rows: RunRows) -> Iterator[dict[str, Any]]:
    """The run's pairs as dicts (the module docstring's fields), candidate by candidate."""
    control_name = manifest["matrix"]["control"]
    evidence = Evidence(rows.run_dir, cases, manifest.get("workload_path"), rows)
    control = rows.arm_rows(control_name)
    every = np.arange(cases.n, dtype=np.int64)
    ids = cases.case_ids.to_pylist()
    columns = evidence.workload_columns([SOURCE_ID, "expected", "messages"], every)
    source_ids, expected = columns[SOURCE_ID], columns["expected"]
    prompts = [prompt_snippet(m) for m in columns["messages"]]
    labels = [
        {col: values[codes[pos]] for col, (codes, values) in cases.labels.items() if codes[pos] >= 0}
        for pos in range(cases.n)
    ]
    control_text = rows.texts(evidence.arm(control_name).row, TEXT)
    for name in manifest["matrix"]["candidates"]:
        cand = rows.arm_rows(name)
        usable = control.usable & cand.usable
        outcomes = pair_outcomes(control.passed, cand.passed, usable).tolist()
        cand_text = rows.texts(evidence.arm(name).row, TEXT)
        for pos in range(cases.n):
            if not (control.present[pos] or cand.present[pos]):
                continue
            ctl_row = {c: control_text[c][pos] for c in TEXT}
            cand_row = {c: cand_text[c][pos] for c in TEXT}
            yield {
                "arm": name,
                "control_arm": control_name,
                "case_id": ids[pos],
                SOURCE_ID: source_ids[pos],
                "labels": labels[pos],
                "prompt": prompts[pos],
                "expected": _expected(expected[pos]),
                "control": _side(control.passed[pos], control.present[pos], ctl_row),
                "candidate": _side(cand.passed[pos], cand.present[pos], cand_row),
                "outcome": OUTCOMES.get(outcomes[pos], NO_PAIR_NAME),
                "first_divergence": cand_row["first_divergence"],
            }


def _expected(stored: str | None) -> Any:
    if stored is None:
        return None
    try:
        return json.loads(stored)
    except ValueError:
        return stored


def samples_jsonl(manifest: dict[str, Any], cases: CaseTable, rows: RunRows) -> str:
    """Every pair as one JSON line (UTF-8 text, keys in a fixed order)."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sample_records(manifest, cases, rows))
