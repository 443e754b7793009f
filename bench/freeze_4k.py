"""Freeze 10,000 passkey cases of 4K tokens with the embedded tokenizer (target ≤ 60 s on 2 cores).

1. `kvgate freeze SUITE -o OUT --model smollm2-135m` on the passkey generator, lengths [4096], in a
   fresh process: all 10,000 cases (`--quick`: 500), wall, CPU and peak RSS; and a 1-case freeze for
   the fixed cost (imports, tokenizer load, write).
2. Side by side in one process, on the same sample of cases: chunked encoding (`chunked_encoding`)
   against the tokenizer encoding every whole prompt. Both must give the same token ids.
3. How many prompts the length search counts per case, and a cProfile of the chunked freeze.

    .venv/bin/python bench/freeze_4k.py [--quick] [--cases N] [--sample K]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common
from workloads import passkey_suite

TARGET_S, CASES, LENGTH, MODEL = 60.0, 10_000, 4096, "smollm2-135m"


def freeze_child(n: int, root: Path) -> common.ChildRun:
    suite = passkey_suite(root / f"pk4k-{n}.toml", n, LENGTH, name=f"passkey-4k-{n}")
    argv = [common.KVGATE, "freeze", str(suite), "-o", str(root / f"pk4k-{n}.parquet"), "--model", MODEL]
    child = common.run_child(argv, 3600)
    if child.returncode != 0:
        raise RuntimeError(f"kvgate freeze exited {child.returncode}: {common.last_line(child.stderr)}")
    return child


def tokenizer() -> Any:
    from kvgate.models import model_folder, resolve_model
    from kvgate.workload.hf_tokenizer import HFPromptTokenizer

    spec = resolve_model(MODEL)
    return HFPromptTokenizer.from_folder(model_folder(spec), spec.name)


def side_by_side(n: int, root: Path) -> dict[str, float]:
    """Freeze the same `n` cases in process with chunked and with whole-prompt encoding (fresh
    tokenizers, so the chunk cache starts empty); seconds per case, prompts counted per case."""
    from kvgate.workload.freeze import freeze_cases
    from kvgate.workload.suites import resolve_suite

    suite = resolve_suite(str(passkey_suite(root / f"side-{n}.toml", n, LENGTH)))
    out: dict[str, float] = {}
    ids: dict[str, list[Any]] = {}
    for label, chunked in (("chunked", True), ("whole", False)):
        tok = tokenizer()
        tok.encoder.chunked = chunked
        counted = 0
        count_chat = tok.count_chat

        def counting(messages: Any, count_chat: Any = count_chat) -> int:
            nonlocal counted
            counted += 1
            return int(count_chat(messages))

        tok.count_chat = counting
        start, cpu = time.perf_counter(), time.process_time()
        cases = freeze_cases([suite], tok, seed=0)
        out[f"{label}_s"] = (time.perf_counter() - start) / n
        out[f"{label}_cpu_s"] = (time.process_time() - cpu) / n
        out[f"{label}_prompts_counted"] = counted / n
        ids[label] = [c.prompt_token_ids for c in cases]
    if ids["chunked"] != ids["whole"]:
        raise AssertionError("chunked and whole-prompt encoding gave different token ids")
    out["speedup"] = out["whole_s"] / out["chunked_s"]
    out["tokens_per_prompt"] = sum(len(i or ()) for i in ids["chunked"]) / n
    return out


def profile_freeze(n: int, root: Path) -> str:
    """cProfile of freezing `n` cases in process (tokenizer loaded before), as a Markdown table."""
    from kvgate.workload.freeze import freeze_cases
    from kvgate.workload.suites import resolve_suite

    tok = tokenizer()
    suite = resolve_suite(str(passkey_suite(root / f"profile-{n}.toml", n, LENGTH)))
    wall, top, _ = common.profile_call_table(lambda: freeze_cases([suite], tok, seed=0), top=10)
    return f"cProfile of freezing {n} cases in process ({wall:.1f} s wall with the profiler):\n\n{top}\n"


def _row(label: str, child: common.ChildRun) -> list[str]:
    return [label, f"{child.wall_s:.1f}", f"{child.cpu_s:.1f}", f"{child.peak_rss_mib:.0f}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="500 cases, a side-by-side sample of 10")
    parser.add_argument("--cases", type=int, default=None, help=f"cases to freeze (default {CASES:,})")
    parser.add_argument("--sample", type=int, default=None, help="cases in the side-by-side (default 200)")
    args = parser.parse_args(argv)
    cases = args.cases or (500 if args.quick else CASES)
    sample = args.sample or (10 if args.quick else 200)
    load = common.load_average()
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-freeze4k-") as tmp:
        root = Path(tmp)
        one, full = freeze_child(1, root), freeze_child(cases, root)
        side = side_by_side(sample, root)
        profile = profile_freeze(sample, root)
    projected = full.wall_s if cases == CASES else one.wall_s + (full.wall_s - one.wall_s) * CASES / cases
    label = "measured" if cases == CASES else f"projected from {cases:,}"
    rows = [
        _row("freeze 1 case (fixed: imports, tokenizer load, write)", one),
        _row(f"**freeze {cases:,} cases**", full),
        [
            f"in process, chunked encoding: per case on the sample × {CASES:,}",
            f"{side['chunked_s'] * CASES:.0f}",
            f"{side['chunked_cpu_s'] * CASES:.0f}",
            "",
        ],
        [
            f"in process, every whole prompt encoded: per case on the sample × {CASES:,}",
            f"{side['whole_s'] * CASES:.0f}",
            f"{side['whole_cpu_s'] * CASES:.0f}",
            "",
        ],
    ]
    ok = projected <= TARGET_S
    text = (
        "## Freeze: 10,000 passkey cases of 4K tokens, embedded tokenizer\n\n"
        + common.provenance([common.PYTHON, __file__, *(argv if argv is not None else sys.argv[1:])], load)
        + f"- suite: passkey, lengths [{LENGTH}], noise haystack, 5 depths; `kvgate freeze SUITE -o OUT "
        f"--model {MODEL}`; prompts average {side['tokens_per_prompt']:.0f} tokens\n"
        f"- target: ≤ {TARGET_S:.0f} s on 2 cores for {CASES:,} cases → {common.verdict(ok)} "
        f"({projected:.1f} s, {label})\n"
        f"- side by side on the same {sample} cases in one process: chunked encoding is "
        f"{side['speedup']:.1f}× faster than encoding every whole prompt, with identical token ids; the "
        f"length search counts {side['chunked_prompts_counted']:.1f} prompts per case\n\n"
        + common.table(["", "wall s", "CPU s", "peak RSS MiB"], rows)
        + "\n\n"
        + profile
    )
    print(text)
    data = {
        "cases": cases,
        "one_case": {"wall_s": one.wall_s, "cpu_s": one.cpu_s, "peak_rss_mib": one.peak_rss_mib},
        "full": {"wall_s": full.wall_s, "cpu_s": full.cpu_s, "peak_rss_mib": full.peak_rss_mib},
        "projected_10k_s": projected,
        "side_by_side": {"sample": sample, **side},
    }
    common.write_section("freeze_4k", text, data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
