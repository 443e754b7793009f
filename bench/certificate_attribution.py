"""The certificate's attribution AUC on a real run, pooled and within each kind of case.

Reads a finished `kvgate run` of a control and one certified eviction arm (e.g. `bench/attribution/
niah_pooled.toml` under `bench/attribution/matrix.toml`) and scores the candidate's failures as the report
does (`kvgate.report.analysis.certificate_attribution`: cache-induced when the control passes, own when it
fails too; every score's AUC for ranking cache-induced above own, with DeLong's interval), over the whole run
and within each stratum of value type (UUID or word needle, read from the expected answer) and context
length, where the kind of case no longer stands in for the kind of failure. A stratum with fewer than
`MIN_PER_KIND` failures of either kind gets no AUC, as in the report.

    .venv/bin/python bench/certificate_attribution.py RUN_DIR WORKLOAD.parquet [RUN_DIR WORKLOAD.parquet ...]
        [--arm streaming-50-cert]

Several runs (each with its frozen workload) are pooled as one: their failures scored together.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import common
import numpy as np
import pyarrow.parquet as pq

from kvgate.report.analysis.certificate_attribution import (
    CONFIDENCE_SCORE,
    MIN_PER_KIND,
    OTHER_SCORES,
    PRIMARY,
)
from kvgate.rundir.store import read_results
from kvgate.stats.roc import delong_auc

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
SCORES = (PRIMARY, *OTHER_SCORES, CONFIDENCE_SCORE)
LABELS = {
    PRIMARY: "mean relative bound (primary)",
    "certificate_bound_max": "bound, max",
    "certificate_bound_mean": "bound, mean",
    "certificate_relative_estimate_mean": "mean relative estimate",
    CONFIDENCE_SCORE: "output confidence (−mean logprob)",
}


def failures(run_dir: Path, workload: Path, control: str, arm: str) -> list[dict[str, Any]]:
    """The candidate's scored failures: per case its kind, value type, length and every score."""
    rows = [r for r in read_results(run_dir).to_pylist() if r["attempt"] == 0 and r["replicate"] == 0]
    cases = {r["case_id"]: r for r in pq.read_table(workload).to_pylist()}
    passed = {
        r["case_id"]: r["passed"] for r in rows if r["arm"] == control and r["fail_kind"] != "engine_error"
    }
    out = []
    for r in rows:
        if r["arm"] != arm or r["passed"] or r["case_id"] not in passed or r["fail_kind"] == "engine_error":
            continue
        scores = {name: r.get(name) for name in SCORES if name != CONFIDENCE_SCORE}
        scores[CONFIDENCE_SCORE] = None if r["mean_logprob"] is None else -r["mean_logprob"]
        if any(v is None or not np.isfinite(v) for v in scores.values()):
            continue
        case = cases[r["case_id"]]
        expected = case["expected"] or "[]"
        expected = json.loads(expected) if isinstance(expected, str) else list(expected)  # stored as JSON
        kind = "uuid" if expected and all(UUID.match(str(e)) for e in expected) else "word"
        out.append(
            {"cache_induced": bool(passed[r["case_id"]]), "value": kind, "ctx": case["ctx_bucket"], **scores}
        )
    return out


def aucs(group: list[dict[str, Any]], confidence: float) -> tuple[int, int, dict[str, Any]]:
    """(cache-induced, own, {score: (auc, lower, upper) or None})."""
    labels = np.array([f["cache_induced"] for f in group], dtype=bool)
    n_cio, n_own = int(labels.sum()), int((~labels).sum())
    found: dict[str, Any] = {}
    for name in SCORES:
        result = None
        if min(n_cio, n_own) >= MIN_PER_KIND:
            result = delong_auc(np.array([f[name] for f in group], dtype=float), labels, confidence)
        found[name] = None if result is None else (result.auc, result.lower, result.upper)
    return n_cio, n_own, found


SECTIONS = {
    "pooled": ("certificate_attribution_pooled", "pooled single needles"),
    "one-run": ("certificate_attribution_one_run", "one run of 288 word needles"),
}
"""--section → (the RESULTS section it writes, its title)."""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", type=Path, nargs="+", help="RUN_DIR WORKLOAD.parquet, one pair per run")
    parser.add_argument("--control", default="full")
    parser.add_argument("--arm", default="streaming-50-cert")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--section",
        choices=sorted(SECTIONS),
        default="pooled",
        help="pooled: several runs' failures together; one-run: one run's, as its report counts them",
    )
    args = parser.parse_args()
    load_before = common.load_average()
    if len(args.runs) % 2:
        parser.error("give each run directory with its workload: RUN_DIR WORKLOAD.parquet [...]")
    pairs = list(zip(args.runs[::2], args.runs[1::2], strict=True))
    found = [f for run, workload in pairs for f in failures(run, workload, args.control, args.arm)]
    strata: list[tuple[str, list[dict[str, Any]]]] = [("all (pooled)", found)]
    for value in sorted({f["value"] for f in found}):
        strata.append((f"{value} needles", [f for f in found if f["value"] == value]))
        for ctx in sorted({f["ctx"] for f in found if f["value"] == value}):
            strata.append(
                (f"{value}, {ctx} tokens", [f for f in found if f["value"] == value and f["ctx"] == ctx])
            )
    rows, data = [], {}
    for label, group in strata:
        n_cio, n_own, result = aucs(group, args.confidence)
        data[label] = {"cache_induced": n_cio, "own": n_own, "auc": result}
        cells = [
            "too few" if v is None else f"{v[0]:.2f} ({v[1]:.2f}–{v[2]:.2f})"
            for v in (result[s] for s in SCORES)
        ]
        rows.append([label, n_cio, n_own, *cells])
    names = ", ".join(f"`{run.name}`" for run, _ in pairs)
    md = (
        f"## Attention-error certificate: attribution AUC, {SECTIONS[args.section][1]} (embedded model)\n\n"
        + common.provenance([sys.executable, *sys.argv], load_before)
        + f"- run{'s' if len(pairs) > 1 else ''} {names}, arm `{args.arm}` against `{args.control}`; "
        f"the candidate's failures "
        f"scored as the report scores them; AUC: a cache-induced failure scores above an own failure (ties "
        f"½), DeLong {args.confidence:.0%} interval; 'too few': under {MIN_PER_KIND} of a kind\n\n"
        + common.table(["failures", "cache-induced", "own", *(LABELS[s] for s in SCORES)], rows)
    )
    if not args.no_write:
        common.write_section(SECTIONS[args.section][0], md, data)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
