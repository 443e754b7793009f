"""Cost of the attention-error certificate: seconds per generated token of an eviction arm with the
certificate, the same arm without it and the full cache, side by side on the same cases.

The same engine (embedded model, float32, one thread) runs each case under every arm, the arms' order
rotating from case to case and from repetition to repetition, the whole set repeated; per arm the median
over repetitions of the summed latency over the summed generated tokens. Per token: the whole request
(prefill included) over the tokens generated; decoding: the time after the first token over the tokens
after it.

    .venv/bin/python bench/certificate_cost.py [--quick] [--cases N] [--repeats R] [--device cpu|cuda]
        [--random-weights]

`--random-weights` builds the model from the embedded model's config with random weights (for a machine
the weights cannot reach); its outputs are noise, so only the timing means anything there.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import certificate_support as support
import common
import torch

from kvgate.engines.base import ArmSetup, Generation
from kvgate.treatments.spec import Eviction, Full, Treatment

METHODS = ("streaming", "snapkv")


def arms(method: str) -> list[Treatment]:
    return [
        Full("full"),
        Eviction(f"{method}-50", method=method, ratio=0.5),
        Eviction(f"{method}-50-cert", method=method, ratio=0.5, certificate=True),
    ]


def timed(engine: Any, treatment: Treatment, case: Any) -> Generation:
    session = engine.open(ArmSetup(treatment.name, 0, treatment, f"bench:{treatment.name}"))
    try:
        generation = session.generate([case])[0]
    finally:
        session.close()
    if generation.error is not None:
        raise RuntimeError(f"{treatment.name} on {case.case_id}: {generation.error}")
    return generation


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--random-weights", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cases", type=int, default=None, help="cases per suite (default 3, quick 1)")
    parser.add_argument("--repeats", type=int, default=None, help="repetitions (default 5, quick 2)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = common.load_average()
    engine = support.engine(args.device, random_weights=args.random_weights)
    count = args.cases or (1 if args.quick else 3)
    repeats = args.repeats or (2 if args.quick else 5)
    cases = support.sample_cases("smoke", count, 1100, 32) + support.sample_cases("ruler", count, 1100, 32)
    started = time.perf_counter()
    rows, data = [], {}
    for method in METHODS:
        treatments = arms(method)
        totals: dict[str, list[tuple[float, float, int]]] = {t.name: [] for t in treatments}
        for repeat in range(repeats):
            sums = {t.name: [0.0, 0.0, 0] for t in treatments}
            for index, case in enumerate(cases):
                turn = (index + repeat) % 3
                order = treatments[turn:] + treatments[:turn]
                for treatment in order:
                    g = timed(engine, treatment, case)
                    s = sums[treatment.name]
                    s[0] += g.latency_s
                    s[1] += g.latency_s - g.ttft_s
                    s[2] += len(g.output_token_ids)
            for name, (latency, decode, tokens) in sums.items():
                totals[name].append((latency, decode, int(tokens)))
        per_token = {n: statistics.median(lat / tok for lat, _, tok in v) for n, v in totals.items()}
        decoding = {
            n: statistics.median(dec / max(1, tok - len(cases)) for _, dec, tok in v)
            for n, v in totals.items()
        }
        full, plain, cert = (t.name for t in treatments)
        data[method] = {
            "per_token_s": per_token,
            "decode_per_token_s": decoding,
            "ratio_vs_plain": per_token[cert] / per_token[plain],
            "decode_ratio_vs_plain": decoding[cert] / decoding[plain],
            "tokens": totals[cert][0][2],
        }
        shown = [f"{per_token[n]:.4f}" for n in (full, plain, cert)] + [
            f"{per_token[cert] / per_token[plain]:.2f}×"
        ]
        shown += [f"{decoding[n]:.4f}" for n in (full, plain, cert)] + [
            f"{decoding[cert] / decoding[plain]:.2f}×"
        ]
        rows.append([method, *shown])
    weights = "random weights from the embedded model's config" if args.random_weights else "embedded model"
    md = (
        f"## Attention-error certificate: cost per generated token ({args.device})\n\n"
        + common.provenance([sys.executable, *sys.argv], load_before)
        + f"- {weights}, float32, {args.threads} thread(s); {len(cases)} cases (smoke and ruler ≤ 1,100 "
        f"prompt tokens, ≤ 32 new tokens), {repeats} repetitions, medians; eviction at 50%, certificate "
        f"share 0.1; {time.perf_counter() - started:.0f} s\n\n"
        + common.table(
            [
                "method",
                "full s/token",
                "eviction s/token",
                "+ certificate s/token",
                "certificate / eviction",
                "full decode s/token",
                "eviction decode",
                "+ certificate decode",
                "decode ratio",
            ],
            rows,
        )
    )
    common.write_section(f"certificate_cost_{args.device}", md, data)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
