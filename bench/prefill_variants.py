"""The hf control's prefill under attention implementations, thread counts and dtypes, side by side.

The longest prompt of a shipped suite (`--suite`: smoke's 1,011 tokens, ruler's 4,096; frozen for the
embedded model) is prefilled through the engine's own forward
(`forward_at`, a fresh cache each time) under each variant; repetitions alternate the variants in a
rotating order, and the figure per variant is the median of its CPU-second ratios to the control
(sdpa, float32, one thread) measured back to back. `onednn` attention is kvgate's blocked prefill
(`-E attention=onednn`, onednn_attention), `linear=onednn` the packed projections (`-E linear=onednn`,
onednn_linear). Each variant then decodes the case greedily for
`--new` tokens: "same tokens" says whether its answer is the control's, token for token (the condition
for changing a default). CPU seconds are the process's, so a second thread's work counts.

    .venv/bin/python bench/prefill_variants.py [--quick] [--reps N] [--new N] [--suite smoke|ruler]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common
from workloads import freeze_for_model

import kvgate.engines.hf  # noqa: F401  (OpenMP's passive waits, set before main() imports torch)

VARIANTS = {  # name → (attention implementation, dtype, torch threads, linear)
    "sdpa, float32, 1 thread (control)": ("sdpa", "float32", 1, "torch"),
    "sdpa, float32, 2 threads": ("sdpa", "float32", 2, "torch"),
    "eager, float32, 1 thread": ("eager", "float32", 1, "torch"),
    "sdpa, bfloat16, 1 thread": ("sdpa", "bfloat16", 1, "torch"),
    "onednn, float32, 1 thread": ("onednn", "float32", 1, "torch"),
    "sdpa, float32, 1 thread, linear=onednn": ("sdpa", "float32", 1, "onednn"),
    "onednn, float32, 1 thread, linear=onednn": ("onednn", "float32", 1, "onednn"),
}
CONTROL = next(iter(VARIANTS))
SECTIONS = {"smoke": ("prefill_variants", ""), "ruler": ("prefill_variants_ruler", ", 4K tokens")}
"""Suite → (results file, title's suffix)."""


def engines() -> dict[str, Any]:
    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model

    out: dict[str, Any] = {}
    loaded: dict[tuple[str, str], Any] = {}
    for name, (_, dtype, _, linear) in VARIANTS.items():
        if (dtype, linear) not in loaded:
            loaded[dtype, linear] = HFEngine(resolve_model("smollm2-135m"), dtype=dtype, linear=linear)
        out[name] = loaded[dtype, linear]
    return out


def use(engine: Any, name: str) -> None:
    """The variant's threads and attention implementation on its engine."""
    import torch

    from kvgate.engines.hf import onednn_attention

    attention, _, threads, _ = VARIANTS[name]
    torch.set_num_threads(threads)
    engine.model.set_attn_implementation(onednn_attention.register() if attention == "onednn" else attention)


def prefill_cpu(engine: Any, name: str, ids: Any) -> float:
    import torch
    from transformers import DynamicCache

    from kvgate.engines.hf.forward import forward_at

    use(engine, name)
    with torch.inference_mode():
        cache = DynamicCache(config=engine.model.config)
        start = time.process_time()
        forward_at(engine.model, ids, cache, 0)
        return time.process_time() - start


def answer(engine: Any, name: str, case: Any) -> tuple[int, ...]:
    from kvgate.engines.base import ArmSetup
    from kvgate.treatments.spec import Full

    use(engine, name)
    session = engine.open(ArmSetup("full", 0, Full("full"), f"bench:{name}"))
    (generation,) = session.generate([case])
    session.close()
    return tuple(generation.output_token_ids)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2 repetitions")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--new", type=int, default=12)
    parser.add_argument("--suite", choices=sorted(SECTIONS), default="smoke", help="shipped suite (smoke)")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args(argv)
    args.reps = args.reps or (2 if args.quick else 5)
    import dataclasses

    import torch

    from kvgate.workload.schema import read_workload

    load = common.load_average()
    here = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-prefill-") as tmp:
        frozen = freeze_for_model(here / "suites" / f"{args.suite}.toml", Path(tmp) / "w.parquet")
        cases = read_workload(frozen).cases
    case = dataclasses.replace(
        max(cases, key=lambda c: len(c.prompt_token_ids or ())), max_new_tokens=args.new
    )
    ids = torch.tensor([case.prompt_token_ids])
    by_name = engines()
    names = list(VARIANTS)
    for name in names:  # warm-up
        prefill_cpu(by_name[name], name, ids)
    cpu = common.alternated(names, args.reps, lambda name, _: prefill_cpu(by_name[name], name, ids))
    tokens = {name: answer(by_name[name], name, case) for name in names}
    rows = []
    for name in names:
        ratio = common.median([a / b for a, b in zip(cpu[name], cpu[CONTROL], strict=True)])
        rows.append([
            name, f"{common.median(cpu[name]):.3f}", f"{ratio:.3f}×", str(tokens[name] == tokens[CONTROL]),
            ", ".join(f"{c:.2f}" for c in cpu[name]),
        ])  # fmt: skip
    text = (
        f"## The hf control's prefill: attention, threads, dtype (cpu{SECTIONS[args.suite][1]})\n\n"
        + common.provenance([common.PYTHON, __file__, *sys.argv[1:]], load)
        + f"- one {args.suite} case of {ids.shape[1]} prompt tokens, prefilled through the engine's forward "
        f"(a fresh cache each time); {args.reps} repetitions, the variants alternating in a rotating order; "
        f"then a greedy answer of up to {args.new} tokens per variant, compared with the control's; OpenMP "
        "waits passive (the hf engine's default)\n\n"
        + common.table(
            [
                "variant",
                "prefill CPU s (median)",
                "÷ control (median of per-repetition ratios)",
                "same tokens as the control",
                "each CPU s",
            ],
            rows,
        )
        + "\n"
    )
    print(text)
    if not args.no_write:
        common.write_section(SECTIONS[args.suite][0], text, {"cpu_s": cpu, "same_tokens": {
            n: tokens[n] == tokens[CONTROL] for n in names}})  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
