"""Cost of the attention-error certificate: seconds per generated token of an eviction arm with the
certificate, the same arm without it and the full cache, side by side on the same cases.

The same engine (embedded model, float32, one thread) runs each case under every arm, the arms' order
rotating from case to case and from repetition to repetition, the whole set repeated. Per repetition and
arm: the process's CPU seconds over the generated tokens (the target's figure: on a shared machine other
work stretches wall time, not the CPU time this process spends), and the wall latency over them; the
ratio certificate ÷ plain is taken within each repetition (the two ran side by side) and its median over
repetitions reported. Per token: the whole request (prefill included) over the tokens generated;
decoding (wall): the time after the first token over the tokens after it. Every arm's tokens must equal
the plain arm's (the certificate only observes).

    .venv/bin/python bench/certificate_cost.py [--quick] [--cases N] [--repeats R] [--device cpu|cuda]
        [--dtype float32|bfloat16|float16] [--random-weights]

On CUDA the target's figure is the wall time (the GPU's work; the engine reads its tokens back every
step, so a step's wall time includes it), CPU seconds beside it; `--dtype bfloat16` gives the certificate
a 16-bit cache, the case where a float32 copy of the retained keys per step would cost most.

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
TARGET = 1.3
"""Per generated token, the certified arm over the plain one, at most this (CPU seconds)."""


def arms(method: str) -> list[Treatment]:
    return [
        Full("full"),
        Eviction(f"{method}-50", method=method, ratio=0.5),
        Eviction(f"{method}-50-cert", method=method, ratio=0.5, certificate=True),
    ]


def timed(engine: Any, treatment: Treatment, case: Any) -> tuple[Generation, float]:
    """The case's generation under `treatment` and the process CPU seconds it took."""
    session = engine.open(ArmSetup(treatment.name, 0, treatment, f"bench:{treatment.name}"))
    try:
        cpu = time.process_time()
        generation = session.generate([case])[0]
        cpu = time.process_time() - cpu
    finally:
        session.close()
    if generation.error is not None:
        raise RuntimeError(f"{treatment.name} on {case.case_id}: {generation.error}")
    return generation, cpu


def ratio(totals: dict[str, list[tuple[float, float, float, int]]], column: int, a: str, b: str) -> float:
    """The median over repetitions of arm a's per-token figure (`column` of each repetition's totals)
    over arm b's in the same repetition."""
    pairs = zip(totals[a], totals[b], strict=True)
    return statistics.median((x[column] / x[3]) / (y[column] / y[3]) for x, y in pairs)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--random-weights", action="store_true")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cases", type=int, default=None, help="cases per suite (default 3, quick 1)")
    parser.add_argument("--repeats", type=int, default=None, help="repetitions (default 5, quick 2)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = common.load_average()
    engine = support.engine(args.device, random_weights=args.random_weights, dtype=args.dtype)
    primary = 2 if args.device == "cpu" else 0  # CPU seconds here, wall time on an accelerator
    count = args.cases or (1 if args.quick else 3)
    repeats = args.repeats or (2 if args.quick else 5)
    cases = support.sample_cases("smoke", count, 1100, 32) + support.sample_cases("ruler", count, 1100, 32)
    started = time.perf_counter()
    rows, data = [], {}
    for method in METHODS:
        treatments = arms(method)
        full, plain, cert = (t.name for t in treatments)
        # per arm, per repetition: (wall latency, wall decode, CPU seconds, tokens)
        totals: dict[str, list[tuple[float, float, float, int]]] = {t.name: [] for t in treatments}
        for repeat in range(repeats):
            sums = {t.name: [0.0, 0.0, 0.0, 0] for t in treatments}
            for index, case in enumerate(cases):
                turn = (index + repeat) % 3
                order = treatments[turn:] + treatments[:turn]
                outputs = {}
                for treatment in order:
                    g, cpu = timed(engine, treatment, case)
                    outputs[treatment.name] = g.output_token_ids
                    s = sums[treatment.name]
                    s[0] += g.latency_s
                    s[1] += g.latency_s - g.ttft_s
                    s[2] += cpu
                    s[3] += len(g.output_token_ids)
                if outputs[cert] != outputs[plain]:
                    raise RuntimeError(f"{cert} changed the tokens of {case.case_id}")
            for name, (latency, decode, cpu, tokens) in sums.items():
                totals[name].append((latency, decode, cpu, int(tokens)))

        cpu = {n: statistics.median(c / tok for _, _, c, tok in v) for n, v in totals.items()}
        per_token = {n: statistics.median(lat / tok for lat, _, _, tok in v) for n, v in totals.items()}
        decoding = {
            n: statistics.median(dec / max(1, tok - len(cases)) for _, dec, _, tok in v)
            for n, v in totals.items()
        }
        cpu_ratios = [(x[2] / x[3]) / (y[2] / y[3]) for x, y in zip(totals[cert], totals[plain], strict=True)]
        data[method] = {
            "cpu_per_token_s": cpu,
            "per_token_s": per_token,
            "decode_per_token_s": decoding,
            "cpu_ratio_vs_plain": ratio(totals, 2, cert, plain),
            "cpu_ratios_per_repetition": cpu_ratios,
            "ratio_vs_plain": ratio(totals, 0, cert, plain),
            "decode_ratio_vs_plain": decoding[cert] / decoding[plain],
            "tokens": totals[cert][0][3],
            "target": TARGET,
            "primary": "cpu" if primary == 2 else "wall",
            "met": ratio(totals, primary, cert, plain) <= TARGET,
        }
        shown = [f"{cpu[n]:.4f}" for n in (full, plain, cert)]
        cpu_cell = f"{ratio(totals, 2, cert, plain):.2f}× ({', '.join(f'{r:.2f}' for r in cpu_ratios)})"
        wall_cell = f"{ratio(totals, 0, cert, plain):.2f}×"
        shown += [f"**{cpu_cell}**" if primary == 2 else cpu_cell]
        shown += [f"{per_token[n]:.4f}" for n in (plain, cert)] + [
            wall_cell if primary == 2 else f"**{wall_cell}**"
        ]
        shown += [f"{decoding[n]:.4f}" for n in (plain, cert)] + [f"{decoding[cert] / decoding[plain]:.2f}×"]
        rows.append([method, *shown])
    weights = "random weights from the embedded model's config" if args.random_weights else "embedded model"
    md = (
        f"## Attention-error certificate: cost per generated token ({args.device})\n\n"
        + common.provenance([sys.executable, *sys.argv], load_before)
        + f"- {weights}, {args.dtype}, {args.threads} thread(s); {len(cases)} cases (smoke and ruler ≤ 1,100 "
        f"prompt tokens, ≤ 32 new tokens), {repeats} repetitions, medians; eviction at 50%, certificate "
        f"share 0.1; {time.perf_counter() - started:.0f} s; the certified arms' tokens equal the plain "
        f"arms' on every case and repetition; target: certificate ÷ eviction ≤ {TARGET} per token in "
        f"{'CPU seconds' if primary == 2 else 'wall time'} (bold)\n\n"
        + common.table(
            [
                "method",
                "full CPU s/token",
                "eviction CPU s/token",
                "+ certificate CPU s/token",
                "certificate ÷ eviction, CPU (per repetition)",
                "eviction wall s/token",
                "+ certificate wall",
                "wall ratio",
                "eviction wall decode",
                "+ certificate wall decode",
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
