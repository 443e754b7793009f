"""Coverage of the attention-error certificate: the share of (case, layer, head, step) cells whose true
attention-output error against the full cache is within the certificate's bound, on the embedded model.

Arms: StreamingLLM and SnapKV at 50% (and with `--all-ratios` 75%) eviction with `certificate = true`
(defaults: expected sample share 0.1, floor 0.02, confidence 0.95). Cases: a seeded sample of the `smoke`
suite and of the `ruler` suite's prompts up to 1,100 tokens (its 1K cell; longer prompts are too slow on
this CPU), each capped at 12 new tokens. Every certified cell of those cases counts
(`kvgate.engines.hf.certificate.replay`).

What is honest about the figure: the bound is the smaller of a deterministic one and a Chebyshev one
whose variance bound σ_max comes from every dropped key the certificate keeps (no plug-in of the
sample's σ̂), so 95% is a guarantee per cell, and the replay checks it. Cells sharing a sample (one per
case, layer and key head) are not independent, so the interval is clustered by (case, layer, key head)
(`certificate.coverage`); with `--draws K` every cell is also bounded by K independent samples (the
first the arm's own), which gives each cell's own chance of being covered and the share of cells below
0.95 and 0.5. Beside it: coverage per layer and of the top decile of true errors, the estimate's and
the noise-corrected estimate's ratio to the true error, the share where the deterministic bound binds.

    .venv/bin/python bench/certificate_coverage.py [--quick] [--cases N] [--draws K] [--all-ratios]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import certificate_support as support
import common
import numpy as np
import torch

from kvgate.engines.hf.certificate.coverage import Coverage, clustered_coverage
from kvgate.engines.hf.certificate.replay import TOLERANCE, CaseCells, replay
from kvgate.treatments.spec import Eviction

SUITES = {"smoke": 1100, "ruler": 1100}
MEANINGFUL = 1e-3
"""Ratios to the true error only over cells whose true error exceeds this."""


def pooled(cells: list[CaseCells], name: str) -> np.ndarray:
    return torch.cat([getattr(c, name).double() for c in cells]).numpy()


def cluster_codes(cells: list[CaseCells], layers: int, heads: int) -> np.ndarray:
    """Per cell, an integer naming its (case, layer, key head): the sample it was bounded from."""
    return np.concatenate(
        [(i * layers + c.layer.numpy()) * heads + c.kv_head.numpy() for i, c in enumerate(cells)]
    )


def interval(c: Coverage) -> dict[str, float]:
    return {
        "share": c.share,
        "lower": c.lower,
        "upper": c.upper,
        "clusters": c.clusters,
        "deff": c.design_effect,
    }


def summarise(cells: list[CaseCells], layers: int, heads: int) -> dict[str, Any]:
    true, bound = pooled(cells, "true"), pooled(cells, "bound")
    estimate, corrected = pooled(cells, "estimate"), pooled(cells, "corrected")
    draws = cells[0].draws
    own = (true <= bound + TOLERANCE).astype(float)
    chance = pooled(cells, "covering_draws") / draws  # each cell's covered share of the draws
    clusters = cluster_codes(cells, layers, heads)
    layer = np.concatenate([c.layer.numpy() for c in cells])
    by_layer = {
        int(i): clustered_coverage(chance[layer == i], clusters[layer == i]) for i in np.unique(layer)
    }
    worst_layer = min(by_layer, key=lambda i: by_layer[i].share)
    top = true >= np.quantile(true, 0.9)
    meaningful = true > MEANINGFUL
    return {
        "cases": len(cells),
        "cells": int(true.size),
        "draws": draws,
        "coverage": interval(clustered_coverage(own, clusters)),
        "coverage_over_draws": interval(clustered_coverage(chance, clusters)),
        "worst_layer": worst_layer,
        "worst_layer_coverage": interval(by_layer[worst_layer]),
        "layers_below_093": sorted(i for i, c in by_layer.items() if c.share < 0.93),
        "top_decile_coverage": interval(clustered_coverage(chance[top], clusters[top])),
        "cells_below_095": float((chance < 0.95).mean()),
        "cells_below_05": float((chance < 0.5).mean()),
        "cap_share": float(pooled(cells, "capped").mean()),
        "bound_over_true_median": float(np.median(bound[meaningful] / true[meaningful])),
        "estimate_over_true_median": float(np.median(estimate[meaningful] / true[meaningful])),
        "corrected_over_true_median": float(np.median(corrected[meaningful] / true[meaningful])),
        "estimate_mae": float(np.abs(estimate - true).mean()),
        "corrected_mae": float(np.abs(corrected - true).mean()),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cases", type=int, default=None, help="cases per suite (default 5, quick 2)")
    parser.add_argument("--draws", type=int, default=20, help="independent samples bounding every cell")
    parser.add_argument("--all-ratios", action="store_true", help="also the 75%% eviction arms")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    count = args.cases or (2 if args.quick else 5)
    torch.set_num_threads(args.threads)
    load_before = common.load_average()
    engine = support.engine()
    config = engine.model.config
    layers, heads = int(config.num_hidden_layers), int(config.num_key_value_heads)
    cases = {s: support.sample_cases(s, count, limit, max_new=12) for s, limit in SUITES.items()}
    arms = [(m, r) for m in ("streaming", "snapkv") for r in ((0.5, 0.75) if args.all_ratios else (0.5,))]
    rows, data = [], {}
    started = time.perf_counter()
    for method, ratio in arms:
        treatment = Eviction(f"{method}-{ratio:g}-cert", method=method, ratio=ratio, certificate=True)
        cells = [c for batch in cases.values() for c in replay(engine, treatment, batch, args.draws)]
        s = summarise(cells, layers, heads)
        data[treatment.name] = s
        rows.append(row(f"{method} {ratio:.0%}", s))
    md = (
        "## Attention-error certificate: coverage on replay cells\n\n"
        + common.provenance([sys.executable, *sys.argv], load_before)
        + f"- {count} cases per suite of smoke and ruler (seeded sample; ruler prompts ≤ 1,100 tokens), "
        "≤ 12 new tokens; a cell is (case, layer, query head, decoding step); covered: true error ≤ bound + "
        f"{TOLERANCE:g}; bound at confidence 0.95 (σ_max from the kept dropped keys, no plug-in), sample "
        f"share 0.1, floor 0.02; {args.draws} independent samples bound every cell (the first the arm's "
        "own); "
        f"{time.perf_counter() - started:.0f} s\n"
        "- coverage: of the arm's own sample, 95% interval clustered by (case, layer, key head), the "
        "cells sharing one sample (`certificate.coverage`: exact bounds on counts divided by the design "
        "effect); over draws: each cell's covered share of the draws, pooled, same clustering; "
        "per-cell chance below 0.95 / 0.5: share of cells whose covered share of the draws is below it "
        f"(binomial noise of {args.draws} draws included); top decile: the cells with the largest 10% of "
        "true errors; ratios to the true error: medians over cells with true error > 1e-3\n\n"
        + common.table(
            [
                "arm",
                "cells (clusters)",
                "coverage",
                "over draws",
                "worst layer",
                "top decile",
                "cells < 0.95 / < 0.5",
                "capped",
                "bound/true",
                "estimate/true",
                "corrected/true",
                "MAE est / corr",
            ],
            rows,
        )
    )
    common.write_section("certificate_coverage", md, data)
    print(md)
    return 0 if all(s["coverage"]["share"] >= 0.95 for s in data.values()) else 1


def cell(c: dict[str, float]) -> str:
    return f"{c['share']:.3f} ({c['lower']:.3f}–{c['upper']:.3f})"


def row(arm: str, s: dict[str, Any]) -> list[str]:
    return [
        arm,
        f"{s['cells']:,} ({s['coverage']['clusters']:,})",
        cell(s["coverage"]),
        cell(s["coverage_over_draws"]),
        f"{s['worst_layer']}: {cell(s['worst_layer_coverage'])}",
        cell(s["top_decile_coverage"]),
        f"{s['cells_below_095']:.3f} / {s['cells_below_05']:.3f}",
        f"{s['cap_share']:.3f}",
        f"{s['bound_over_true_median']:.2f}",
        f"{s['estimate_over_true_median']:.3f}",
        f"{s['corrected_over_true_median']:.3f}",
        f"{s['estimate_mae']:.4f} / {s['corrected_mae']:.4f}",
    ]


if __name__ == "__main__":
    sys.exit(main())
