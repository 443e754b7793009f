"""The hf engine's flat prefill (kvgate/engines/hf/prefill_step.py) against transformers' modules, side
by side in one process, under each attention the flat prefill takes (SDPA's, oneDNN's blocks).

For each prompt length (smoke's 507 and 1,011 tokens; random token ids, the cost does not depend on
them) and attention, every repetition prefills the prompt into a fresh cache once through the flat ops
and once through the modules, the order alternating; the figure is the median of the per-repetition
CPU-second ratios (flat ÷ modules) after one warm-up. The logits must be equal bit for bit every time,
or the benchmark fails. One torch thread; the embedded model with the engine's projections.

    .venv/bin/python bench/flat_prefill.py [--quick] [--reps N]
"""

from __future__ import annotations

import argparse
import resource
import sys
from typing import Any

import common

import kvgate.engines.hf  # noqa: F401  (OpenMP's passive waits, set before main() imports torch)

LENGTHS = (507, 1011)
MODEL = "smollm2-135m"


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(model: Any, n: int, reps: int) -> dict[str, Any]:
    """CPU seconds of the flat and the modules' prefill of n random tokens, `reps` alternated pairs after
    a warm-up pair; raises if their logits ever differ."""
    import torch

    from kvgate.engines.hf import prefill_step
    from kvgate.engines.hf.preallocated_cache import preallocated_cache

    ids = torch.randint(0, model.config.vocab_size, (1, n), generator=torch.Generator().manual_seed(n))
    positions = torch.arange(n).unsqueeze(0)

    def run(side: str) -> tuple[float, torch.Tensor]:
        cache = preallocated_cache(model.config, n + 1)
        if side == "flat" and not prefill_step.applies(model, ids, cache, 0):
            raise SystemExit(f"the flat prefill does not apply to {model.config._attn_implementation}")
        start = cpu_seconds()
        if side == "flat":
            logits = prefill_step.prefill(model, ids, cache)
        else:
            kwargs = {"past_key_values": cache, "position_ids": positions, "use_cache": True}
            logits = model(input_ids=ids, logits_to_keep=1, **kwargs).logits
        return cpu_seconds() - start, logits

    cpu: dict[str, list[float]] = {"flat": [], "modules": []}
    with torch.inference_mode():
        for rep in range(reps + 1):
            logits = {}
            for side in common.rotated(("flat", "modules"), rep):
                seconds, logits[side] = run(side)
                if rep:  # the first pair warms up
                    cpu[side].append(seconds)
            if not torch.equal(logits["flat"], logits["modules"]):
                raise SystemExit(f"flat and modules' logits differ at {n} tokens")
    ratios = [f / m for f, m in zip(cpu["flat"], cpu["modules"], strict=True)]
    return {"n": n, "cpu": cpu, "ratios": ratios, "ratio": common.median(ratios)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2 repetitions")
    parser.add_argument("--reps", type=int, default=None, help="alternated pairs per length (default 5)")
    args = parser.parse_args(argv)
    reps = args.reps or (2 if args.quick else 5)
    if reps < 1:
        parser.error("--reps must be ≥ 1")
    import torch

    from kvgate.engines.hf import onednn_attention
    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model

    load = common.load_average()
    torch.set_num_threads(1)
    engine = HFEngine(resolve_model(MODEL), threads=1)
    model = engine.model
    kernels = {"linear": engine.linear, "attention": engine.attention}
    attentions = {"sdpa": "sdpa"}
    if onednn_attention.available():
        attentions["onednn"] = onednn_attention.register()
    results: dict[str, list[dict[str, Any]]] = {}
    for name, implementation in attentions.items():
        model.set_attn_implementation(implementation)
        results[name] = [measure(model, n, reps) for n in LENGTHS]
    rows = [
        [
            name,
            r["n"],
            f"{common.median(r['cpu']['flat']):.2f}",
            f"{common.median(r['cpu']['modules']):.2f}",
            f"{r['ratio']:.3f}×",
            ", ".join(f"{x:.3f}" for x in r["ratios"]),
        ]
        for name, by_length in results.items()
        for r in by_length
    ]
    text = (
        "## The hf flat prefill against transformers' modules (cpu, one thread, one process)\n\n"
        + common.provenance([common.PYTHON, __file__, *sys.argv[1:]], load)
        + f"- {MODEL}, the engine's `linear={kernels['linear']}` (its default attention here: "
        f"`{kernels['attention']}`), random prompts, a fresh cache each prefill; {reps} alternated pairs "
        "after a warm-up; logits equal bit for bit in every pair\n\n"
        + common.table(
            ["attention", "prompt tokens", "flat CPU s", "modules CPU s", "flat ÷ modules", "per pair"], rows
        )
    )
    print(text)
    common.write_section("flat_prefill", text, {"results": results, **kernels})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
