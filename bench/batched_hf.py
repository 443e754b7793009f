"""The batched hf engine against the unbatched one, and the preallocated KV cache against transformers'
concatenating one, on the embedded model, side by side in one process.

Workloads: 8 passkey cases of one prompt length decoded greedily for 12 new tokens (smoke-like; most
answers end sooner, at EOS), and 8 counting cases of one prompt length (a passkey case's context, then
"write the numbers from k000 to k200", k = 1 … 8) decoded for up to 64 new tokens (the embedded model
answers the passkey instead and stops at EOS: the section says so rather than judge the 1.5× target).
Sides, all on the full-cache control, each repetition running every side once in a rotating order so
load swings on the shared machine fall on all of them:

- one at a time: batch_size 1, the preallocated cache (the engine before batching, but for the cache);
- batched: batch_size 8 (cases grouped by prompt length: one batch here);
- batched, dynamic cache: batch_size 8 on transformers' DynamicCache (torch.cat on every step).

CPU seconds are the process's (torch on `--threads` threads); tokens per CPU-second count the tokens
generated. Every side must produce the same output tokens as one-at-a-time in every repetition.

    .venv/bin/python bench/batched_hf.py [--quick] [--reps N] [--length L] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common
from workloads import freeze_for_model, passkey_suite

MODEL, CASES = "smollm2-135m", 8
TARGETS = {12: 1.25, 64: 1.5}
"""Batched ÷ one-at-a-time throughput the issue asks for, by new tokens (on this CPU)."""


def cases_of(length: int, new: int, tmp: Path) -> list[Any]:
    from kvgate.workload.schema import read_workload

    suite = passkey_suite(tmp / f"suite-{length}.toml", CASES, length)
    return list(read_workload(freeze_for_model(suite, tmp / f"w-{length}.parquet", MODEL)).cases)


def counting_cases(engine: Any, passkey: list[Any], new: int) -> list[Any]:
    """Cases whose answers run to `new` tokens: a passkey case's prompt, its last turn asking to count
    from k000 upwards (k = 1 … 8), tokenized with the model's chat template; all of one length."""
    import dataclasses

    out = []
    for k, case in enumerate(passkey, start=1):
        content = (
            f"{case.messages[-1]['content']}\n\nIgnore the question. Write the numbers from {k}000 to {k}200."
        )
        messages = [*case.messages[:-1], {"role": "user", "content": content}]
        ids = engine.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids  # a BatchEncoding in transformers 5
        out.append(dataclasses.replace(case, prompt_token_ids=tuple(int(i) for i in ids), max_new_tokens=new))
    shortest = min(len(c.prompt_token_ids) for c in out)
    return [dataclasses.replace(c, prompt_token_ids=c.prompt_token_ids[-shortest:]) for c in out]


def side(engine: Any, cases: list[Any], batch_size: int, dynamic: bool) -> tuple[float, float, list[Any]]:
    """(CPU s, wall s, generations) of one session generating `cases`."""
    import torch
    from transformers import DynamicCache

    from kvgate.engines.base import ArmSetup
    from kvgate.treatments.spec import Full

    setup = ArmSetup("full", 0, Full("full"), f"bench:{batch_size}:{dynamic}", batch_size=batch_size)
    session = engine.open(setup)
    if dynamic:
        session._cache = lambda capacity, certified: DynamicCache(config=engine.model.config)
    if engine.device.type == "cuda":
        torch.cuda.synchronize()
    cpu, wall = time.process_time(), time.perf_counter()
    out = session.generate(cases)
    if engine.device.type == "cuda":
        torch.cuda.synchronize()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    session.close()
    return cpu, wall, out


SIDES = {"one at a time": (1, False), "batched": (CASES, False), "batched, dynamic cache": (CASES, True)}


def measure(engine: Any, cases: list[Any], reps: int) -> dict[str, Any]:
    names = list(SIDES)
    runs: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    tokens = 0
    identical = True
    side(engine, cases[:2], 2, False)  # warm-up
    for rep in range(reps):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        outputs = {}
        for name in order:
            batch_size, dynamic = SIDES[name]
            cpu, wall, out = side(engine, cases, batch_size, dynamic)
            if any(g.error for g in out):
                raise SystemExit(f"{name}: {next(g.error for g in out if g.error)}")
            runs[name].append((cpu, wall))
            outputs[name] = [g.output_token_ids for g in out]
        identical &= all(o == outputs["one at a time"] for o in outputs.values())
        tokens = sum(len(t) for t in outputs["one at a time"])
    return {"runs": runs, "tokens": tokens, "identical": identical}


def ratios(runs: dict[str, list[tuple[float, float]]], a: str, b: str, i: int) -> list[float]:
    """Per repetition: side a's seconds ÷ side b's (index i: 0 CPU, 1 wall)."""
    return [x[i] / y[i] for x, y in zip(runs[a], runs[b], strict=True)]


def section(result: dict[int, dict[str, Any]], args: argparse.Namespace, load: str, threads: int) -> str:
    rows = []
    for new, r in result.items():
        runs, tokens = r["runs"], r["tokens"]
        speedup = common.median(ratios(runs, "one at a time", "batched", 0))
        cache = common.median(ratios(runs, "batched, dynamic cache", "batched", 0))
        target = TARGETS.get(new)
        met = f" (target ≥ {target}: {common.verdict(speedup >= target)})" if target else ""
        if new > 12 and tokens < 0.9 * new * CASES:  # the answers ended at EOS: not a long-decode workload
            met = f" (target ≥ {target} on ≥ {new} tokens a case: not measured, the answers ended at EOS)"
        rows.append([
            f"{new} new tokens ({tokens} generated)",
            *(f"{common.median([c for c, _ in runs[n]]):.2f}" for n in SIDES),
            *(f"{tokens / common.median([c for c, _ in runs[n]]):.1f}" for n in SIDES),
            f"**{speedup:.2f}×**{met}",
            f"{cache:.3f}×",
            str(r["identical"]),
        ])  # fmt: skip
    header = [
        "workload", *(f"CPU s: {n}" for n in SIDES), *(f"tokens/CPU-s: {n}" for n in SIDES),
        "batched speed-up (median of per-repetition CPU ratios)",
        "dynamic ÷ preallocated cache, batched (CPU)", "same tokens on every side",
    ]  # fmt: skip
    each = "; ".join(
        f"{new} new: " + ", ".join(f"{n} " + "/".join(f"{c:.2f}" for c, _ in r["runs"][n]) for n in SIDES)
        for new, r in result.items()
    )
    return (
        f"## Batched hf engine and preallocated KV cache ({args.device})\n\n"
        + common.provenance([common.PYTHON, __file__, *sys.argv[1:]], load)
        + f"- workload: {CASES} passkey cases of {args.length} tokens, greedy, the full-cache control; "
        f"{args.reps} repetitions, every side once per repetition, the order rotating; "
        f"torch threads {threads}\n"
        f"- each repetition's CPU s: {each}\n\n"
        + common.table(header, rows)
        + "\n"
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2 repetitions, 12 new tokens only")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    parser.add_argument("--only", type=int, action="append", help="12 or 64: that workload alone")
    args = parser.parse_args(argv)
    args.reps = args.reps or (2 if args.quick else 3)
    import torch

    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model

    torch.set_num_threads(args.threads)
    load = common.load_average()
    engine = HFEngine(resolve_model(MODEL), device=args.device)
    result = {}
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-batched-") as tmp:
        passkey = cases_of(args.length, 12, Path(tmp))
        workloads = {12: [dataclasses.replace(c, max_new_tokens=12) for c in passkey]}
        if not args.quick:
            workloads[64] = counting_cases(engine, passkey, 64)
        for new in args.only or list(workloads):
            result[new] = measure(engine, workloads[new], args.reps)
    text = section(result, args, load, torch.get_num_threads())
    print(text)
    if not args.no_write:
        name = "batched_hf" if args.device == "cpu" else f"batched_hf_{args.device}"
        data = {
            str(k): {"runs": v["runs"], "tokens": v["tokens"], "identical": v["identical"]}
            for k, v in result.items()
        }
        common.write_section(name, text, data)
    return 0 if all(r["identical"] for r in result.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
