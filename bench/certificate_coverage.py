"""Coverage of the attention-error certificate: the share of (case, layer, head, step) cells whose true
attention-output error against the full cache is within the certificate's bound, on the embedded model.

Arms: StreamingLLM and SnapKV at 50% and 75% eviction with `certificate = true` (defaults: expected sample
share 0.1, floor 0.02, confidence 0.95). Cases: a seeded sample of the `smoke` suite and of the `ruler`
suite's prompts up to 1,100 tokens (its 1K cell; longer prompts are too slow on this CPU), each capped at
12 new tokens. Every certified cell of those cases counts (`kvgate.engines.hf.certificate.replay`).

    .venv/bin/python bench/certificate_coverage.py [--quick] [--cases N]
"""

from __future__ import annotations

import argparse
import sys
import time

import certificate_support as support
import common
import torch

from kvgate.engines.hf.certificate.replay import TOLERANCE, CaseCells, replay
from kvgate.treatments.spec import Eviction

ARMS = [(m, r) for m in ("streaming", "snapkv") for r in (0.5, 0.75)]
SUITES = {"smoke": 1100, "ruler": 1100}


def summarise(cells: list[CaseCells]) -> dict[str, float | int]:
    true = torch.cat([c.true for c in cells])
    bound = torch.cat([c.bound for c in cells]).double()
    estimate = torch.cat([c.estimate for c in cells]).double()
    covered = sum(c.covered for c in cells)
    per_case = [c.covered / c.true.numel() for c in cells]
    meaningful = true > 1e-3
    return {
        "cases": len(cells),
        "cells": int(true.numel()),
        "covered": covered,
        "coverage": covered / true.numel(),
        "worst_case_coverage": min(per_case),
        "true_mean": float(true.mean()),
        "estimate_mean": float(estimate.mean()),
        "estimate_mae": float((estimate - true).abs().mean()),
        "bound_mean": float(bound.mean()),
        "bound_over_true_median": float((bound[meaningful] / true[meaningful]).median()),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cases", type=int, default=None, help="cases per suite (default 5, quick 2)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    count = args.cases or (2 if args.quick else 5)
    torch.set_num_threads(args.threads)
    load_before = common.load_average()
    engine = support.engine()
    cases = {s: support.sample_cases(s, count, limit, max_new=12) for s, limit in SUITES.items()}
    rows, data, every = [], {}, []
    started = time.perf_counter()
    for method, ratio in ARMS:
        treatment = Eviction(f"{method}-{ratio:g}-cert", method=method, ratio=ratio, certificate=True)
        for suite, suite_cases in cases.items():
            cells = replay(engine, treatment, suite_cases)
            every += cells
            s = summarise(cells)
            data[f"{suite}/{treatment.name}"] = s
            rows.append(row(f"{method} {ratio:.0%}", suite, s))
    total = summarise(every)
    data["all"] = total
    rows.append(row("**all**", "smoke + ruler", total))
    md = (
        "## Attention-error certificate: coverage on replay cells\n\n"
        + common.provenance([sys.executable, *sys.argv], load_before)
        + f"- {count} cases per suite (seeded sample; ruler prompts ≤ 1,100 tokens), ≤ 12 new tokens; a "
        "cell is (case, layer, query head, decoding step); covered: true error ≤ bound + "
        f"{TOLERANCE:g}; bound at confidence 0.95, sample share 0.1, floor 0.02; "
        f"{time.perf_counter() - started:.0f} s\n"
        "- true: ‖attention over retained ∪ dropped − over retained‖ for the arm's own query (float64); "
        "bound/true: median over cells with true error > 1e-3\n\n"
        + common.table(
            [
                "arm",
                "suite",
                "cases",
                "cells",
                "coverage",
                "worst case",
                "mean true",
                "mean estimate",
                "mean bound",
                "bound/true",
            ],
            rows,
        )
    )
    common.write_section("certificate_coverage", md, data)
    print(md)
    return 0 if total["coverage"] >= 0.95 else 1


def row(arm: str, suite: str, s: dict) -> list:
    return [arm, suite, s["cases"], f"{s['cells']:,}", f"{s['coverage']:.4f}",
            f"{s['worst_case_coverage']:.3f}", f"{s['true_mean']:.4f}", f"{s['estimate_mean']:.4f}",
            f"{s['bound_mean']:.4f}", f"{s['bound_over_true_median']:.2f}"]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
