"""Freeze 10,000 passkey cases of 4K tokens with the embedded tokenizer (target ≤ 60 s on 2 cores).

`kvgate freeze SUITE -o OUT --model smollm2-135m` on the passkey generator, lengths [4096], in fresh
processes. The whole 10,000 takes most of an hour on this machine, so by default two samples of the
same suite are frozen and the marginal cost per case is projected to 10,000 (`--full` freezes all of
them). Then, in process:

- a cProfile of `freeze_cases` on a few cases: where the time goes, and how many times the tokenizer
  encodes a whole 4K-token prompt per case;
- the floor: the tokenizer alone encoding each rendered prompt once, one at a time and as one batch
  (HF tokenizers encode a batch on every core) — what any freeze that tokenizes every prompt must pay.

    .venv/bin/python bench/freeze_4k.py [--quick] [--full] [--samples A B]
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
    child = common.run_child(argv, 4 * 3600)
    if child.returncode != 0:
        raise RuntimeError(f"kvgate freeze exited {child.returncode}: {common.last_line(child.stderr)}")
    return child


def tokenizer() -> Any:
    from kvgate.models import model_folder, resolve_model
    from kvgate.workload.hf_tokenizer import HFPromptTokenizer

    spec = resolve_model(MODEL)
    return HFPromptTokenizer.from_folder(model_folder(spec), spec.name)


def profile_freeze(n: int, root: Path) -> tuple[str, dict[str, float]]:
    """cProfile of freezing `n` cases in process (the tokenizer loaded before); the Markdown table and
    the calls per case of the tokenizer entry points."""
    from kvgate.workload.freeze import freeze_cases
    from kvgate.workload.suites import resolve_suite

    tok = tokenizer()
    suite = resolve_suite(str(passkey_suite(root / f"profile-{n}.toml", n, LENGTH)))
    wall, top, stats = common.profile_call_table(lambda: freeze_cases([suite], tok, seed=0), top=10)
    calls, encoding = {}, 0.0
    for (filename, _, func), (_, ncalls, tottime, *_rest) in stats.items():
        if filename.endswith("hf_tokenizer.py") and func in ("encode_chat", "count_chat", "question_start"):
            calls[func] = ncalls / n
        if func.endswith("encode_batch' of 'tokenizers.Tokenizer' objects>"):  # the Rust encoder
            calls["whole-prompt encodes"] = ncalls / n
            encoding += tottime
    calls["share of the time in the Rust encoder"] = encoding / wall
    return f"cProfile of freezing {n} cases in process ({wall:.1f} s wall):\n\n{top}\n", calls


def tokenizer_floor(workload: Path) -> dict[str, float]:
    """Seconds per case to encode each frozen prompt once: one at a time, and all as one batch."""
    from kvgate.workload.schema import read_workload

    tok = tokenizer()
    texts = [tok.render(case.messages) for case in read_workload(workload).cases]
    backend = tok.tokenizer._tokenizer  # the Rust tokenizer behind the transformers wrapper
    start, cpu = time.perf_counter(), time.process_time()
    for text in texts:
        backend.encode(text, add_special_tokens=False)
    one, one_cpu = (time.perf_counter() - start) / len(texts), (time.process_time() - cpu) / len(texts)
    start, cpu = time.perf_counter(), time.process_time()
    backend.encode_batch(texts, add_special_tokens=False)
    batch, batch_cpu = (time.perf_counter() - start) / len(texts), (time.process_time() - cpu) / len(texts)
    tokens = sum(len(backend.encode(t, add_special_tokens=False).ids) for t in texts) / len(texts)
    return {
        "one_at_a_time_s": one,
        "one_at_a_time_cpu_s": one_cpu,
        "batched_s": batch,
        "batched_cpu_s": batch_cpu,
        "tokens_per_prompt": tokens,
        "prompts": len(texts),
    }


def _row(label: str, child: common.ChildRun) -> list[str]:
    return [label, f"{child.wall_s:.1f}", f"{child.cpu_s:.1f}", f"{child.peak_rss_mib:.0f}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="samples of 2 and 6 cases, profile 2")
    parser.add_argument("--full", action="store_true", help="freeze all 10,000 (about an hour here)")
    parser.add_argument("--samples", type=int, nargs=2, default=None, metavar=("A", "B"))
    args = parser.parse_args(argv)
    a, b = args.samples or ((2, 6) if args.quick else (10, 50))
    load = common.load_average()
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-freeze4k-") as tmp:
        root = Path(tmp)
        small, large = freeze_child(a, root), freeze_child(b, root)
        per_case = (large.wall_s - small.wall_s) / (b - a)
        per_case_cpu = (large.cpu_s - small.cpu_s) / (b - a)
        fixed = small.wall_s - a * per_case
        projected = fixed + CASES * per_case
        full = freeze_child(CASES, root) if args.full else None
        floor = tokenizer_floor(root / f"pk4k-{b}.parquet")
        profile, calls = profile_freeze(2 if args.quick else 10, root)
    wall = full.wall_s if full else projected
    ok = wall <= TARGET_S
    floor_one, floor_batch = CASES * floor["one_at_a_time_s"], CASES * floor["batched_s"]
    proj_cpu = full.cpu_s if full else small.cpu_s + (CASES - a) * per_case_cpu
    rss = f"{full.peak_rss_mib:.0f}" if full else ""
    rows = [
        _row(f"freeze {a} cases (fresh process)", small),
        _row(f"freeze {b} cases (fresh process)", large),
        ["marginal per case", f"{per_case:.3f}", f"{per_case_cpu:.3f}", ""],
        ["fixed (imports, tokenizer load, write)", f"{fixed:.1f}", "", ""],
        [
            f"**{CASES:,} cases, {'measured' if full else 'projected'}**",
            f"**{wall:.0f}**",
            f"{proj_cpu:.0f}",
            rss,
        ],
        [
            f"floor: the tokenizer encoding each prompt once, one at a time, × {CASES:,}",
            f"{floor_one:.0f}",
            f"{CASES * floor['one_at_a_time_cpu_s']:.0f}",
            "",
        ],
        [
            f"floor: the same as one batch (all cores), × {CASES:,}",
            f"{floor_batch:.0f}",
            f"{CASES * floor['batched_cpu_s']:.0f}",
            "",
        ],
    ]
    needed = CASES * floor["tokens_per_prompt"] / TARGET_S
    one_rate = floor["tokens_per_prompt"] / floor["one_at_a_time_s"]
    batch_rate = floor["tokens_per_prompt"] / floor["batched_s"]
    per = (
        f"{calls.get('whole-prompt encodes', 0):.0f} whole-prompt encodes per case "
        f"(`count_chat` {calls.get('count_chat', 0):.0f}: fit_to_length's probes; `encode_chat` "
        f"{calls.get('encode_chat', 0):.0f}, of which the count_chat probes are part; `question_start` "
        f"{calls.get('question_start', 0):.0f}); the Rust encoder takes "
        f"{100 * calls['share of the time in the Rust encoder']:.0f}% of freezing"
    )
    text = (
        "## Freeze: 10,000 passkey cases of 4K tokens, embedded tokenizer\n\n"
        + common.provenance([common.PYTHON, __file__, *(argv if argv is not None else sys.argv[1:])], load)
        + f"- suite: passkey, lengths [{LENGTH}], noise haystack, 5 depths; `kvgate freeze SUITE -o OUT "
        f"--model {MODEL}`; prompts average {floor['tokens_per_prompt']:.0f} tokens\n"
        f"- target: ≤ {TARGET_S:.0f} s on 2 cores → wall: {common.verdict(ok)} ({wall:.0f} s"
        f"{'' if full else ', projected'}); CPU seconds (what an idle machine would take; freezing uses one "
        f"core): {common.verdict(proj_cpu <= TARGET_S)} ({proj_cpu:.0f} s)\n"
        f"- where the time goes: {per}\n"
        f"- the {TARGET_S:.0f} s target needs {needed / 1000:.0f}K tokens/s if every prompt is encoded once; "
        f"this tokenizer encodes {one_rate / 1000:.0f}K tokens/s one prompt at a time and "
        f"{batch_rate / 1000:.0f}K tokens/s batched on all cores: one batched encode per case and nothing "
        "more is the only way to the target (the floor rows)\n\n"
        + common.table(["", "wall s", "CPU s", "peak RSS MiB"], rows)
        + "\n\n"
        + profile
    )
    print(text)
    data = {
        "samples": [a, b],
        "walls": [small.wall_s, large.wall_s],
        "cpus": [small.cpu_s, large.cpu_s],
        "per_case_s": per_case,
        "projected_s": projected,
        "projected_cpu_s": proj_cpu,
        "full_s": full.wall_s if full else None,
        "floor": floor,
        "calls_per_case": calls,
    }
    common.write_section("freeze_4k", text, data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
