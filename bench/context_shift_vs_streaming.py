"""llama.cpp's context shift against the hf reference's StreamingLLM, case by case, at one ratio and sink.

Reads a finished `kvgate run --engine llamacpp -m llamacpp` run (its `full` and `streaming-50` rows), runs
the hf engine's `streaming-50` on the same frozen cases (or reads that pass from `--hf-cache`, where it
is saved, so it can run while the llama.cpp run still does), and writes, per case, the KV entries each
kept and whether each answered; the section goes to bench/RESULTS.md. The two differ by
more than the eviction: llama.cpp runs the GGUF's Q4_1 weights in its own kernels with an f16 KV cache and
renumbers the kept positions (its shift), the reference the de-quantised float32 weights with true
positions kept. The kept entries must agree exactly.

    .venv/bin/python bench/context_shift_vs_streaming.py RUN_DIR [--threads 1] [--hf-cache FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import common

from kvgate.engines.base import ArmSetup, Generation
from kvgate.models import resolve_model
from kvgate.rundir.manifest import read_manifest
from kvgate.rundir.store import read_results
from kvgate.treatments.matrix import catalog_tables, parse_treatment
from kvgate.validators.registry import get_validator
from kvgate.workload.case import Case
from kvgate.workload.schema import read_workload
from kvgate.workload.selection import select_cases

ARM = "streaming-50"


def hf_pass(cases: list[Case], threads: int, cache: Path | None) -> list[dict[str, Any]]:
    """The hf engine's streaming-50 on `cases`: per case its output, entries kept and verdict."""
    if cache is not None and cache.exists():
        return list(json.loads(cache.read_text()))
    from kvgate.engines.hf.engine import HFEngine

    engine = HFEngine(resolve_model("smollm2-135m"), threads=threads)
    treatment = parse_treatment(ARM, catalog_tables(), "catalog")
    session = engine.open(ArmSetup(ARM, 0, treatment, f"bench:{ARM}"))
    try:
        generations = session.generate(cases)
    finally:
        session.close()
    out = [
        {"case_id": c.case_id, "output": g.output_text, "kept": g.n_kv_entries_kept, "passed": passed(c, g)}
        for c, g in zip(cases, generations, strict=True)
    ]
    if cache is not None:
        cache.write_text(json.dumps(out, indent=1))
    return out


def passed(case: Case, gen: Generation) -> bool:
    if gen.error is not None:
        return False
    return get_validator(case.validator)(gen.output_text, case.expected, case.validator_args).passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--hf-cache", type=Path, help="where the hf pass is saved, and read from if there")
    args = parser.parse_args(argv)
    load_before = common.load_average()
    manifest = read_manifest(args.run_dir)
    cases = list(select_cases(read_workload(Path(manifest["workload_path"])), manifest.get("limit")))
    hf = hf_pass(cases, args.threads, args.hf_cache)
    rows = read_results(args.run_dir).to_pylist()
    mine = {(r["arm"], r["case_id"]): r for r in rows if r["replicate"] == 0 and r["attempt"] == 0}
    if any(("full", c.case_id) not in mine or (ARM, c.case_id) not in mine for c in cases):
        print(f"{args.run_dir} lacks rows of full or {ARM} yet; the hf pass is saved in {args.hf_cache}")
        return 3
    table, agree_kept, same_verdict, passes = [], 0, 0, {"full": 0, ARM: 0, "hf": 0}
    for case, shift in zip(cases, hf, strict=True):
        lc_full, lc_shift = mine[("full", case.case_id)], mine[(ARM, case.case_id)]
        agree_kept += int(lc_shift["n_kv_entries_kept"] == shift["kept"])
        same_verdict += int(lc_shift["passed"] == shift["passed"])
        passes["full"] += int(lc_full["passed"])
        passes[ARM] += int(lc_shift["passed"])
        passes["hf"] += int(shift["passed"])
        table.append(
            [
                case.case_id[:8],
                case.slices.get("ctx_bucket", ""),
                case.slices.get("depth_bucket", ""),
                case.n_prompt_tokens,
                lc_shift["n_kv_entries_kept"],
                shift["kept"],
                "✓" if lc_full["passed"] else "✗",
                f"{'✓' if lc_shift['passed'] else '✗'} {lc_shift['output_text'][:24]!r}",
                f"{'✓' if shift['passed'] else '✗'} {shift['output'][:24]!r}",
            ]
        )
    n = len(cases)
    limit = f" --limit {manifest['limit']}" if manifest.get("limit") else ""
    header = ["case", "ctx", "depth", "prompt", "kept llama.cpp", "kept hf", "llama.cpp full",
              "llama.cpp context shift", "hf StreamingLLM"]  # fmt: skip
    markdown = (
        "## llama.cpp's context shift against the hf reference's StreamingLLM (smoke suite)\n\n"
        + common.provenance([common.PYTHON, *sys.argv], load_before)
        + f"- llama.cpp run: `{args.run_dir}` "
        f"(`kvgate run --engine llamacpp -m llamacpp -E threads=1{limit}`), "
        f"its `full` and `{ARM}` rows; hf: `{ARM}` (ratio 0.5, 4 sinks) on the same {n} frozen cases, "
        f"{args.threads} torch thread(s)\n"
        f"- kept KV entries agree in **{agree_kept} of {n}** cases; verdicts agree in {same_verdict} of {n}\n"
        f"- passed: llama.cpp f16 control {passes['full']}/{n}, llama.cpp context shift {passes[ARM]}/{n}, "
        f"hf StreamingLLM {passes['hf']}/{n}\n"
        "- they differ beyond the eviction: llama.cpp runs the GGUF's Q4_1 weights with an f16 KV cache and "
        "renumbers the kept positions (its shift); the reference runs de-quantised float32 weights and keeps "
        "true positions\n\n" + common.table(header, table) + "\n"
    )
    data = {"cases": n, "kept_agree": agree_kept, "verdicts_agree": same_verdict, "passed": passes}
    common.write_section("context_shift_vs_streaming", markdown, data)
    print(markdown)
    return 0 if agree_kept == n else 1


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
