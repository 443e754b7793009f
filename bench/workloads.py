"""Workloads the benchmarks run on: passkey suites written on the fly, and synthetic workloads of any size.

`passkey_suite` writes a suite spec (TOML) of `cases` passkey cases at one length, frozen the ordinary way
(`kvgate freeze`, or `freeze_for_model` for the embedded tokenizer). `synthetic_workload` skips the
generators for the growth benchmark's run and report measurements: n cases with tiny prompts and a
substring validator, written by `write_workload` (so hashed and readable like any frozen workload).
"""

from __future__ import annotations

from pathlib import Path

DEPTHS = (0.1, 0.3, 0.5, 0.7, 0.9)


def passkey_suite(path: Path, cases: int, length: int, name: str = "bench-passkey") -> Path:
    """A suite of `cases` passkey cases of `length` tokens (needle depths cycle through DEPTHS)."""
    depths = DEPTHS[: min(cases, len(DEPTHS))]
    per_cell = -(-cases // len(depths))
    if per_cell * len(depths) != cases:
        depths, per_cell = (0.5,), cases
    path.write_text(
        f'name = "{name}"\n'
        f'description = "benchmark: {cases} passkey cases of {length} tokens"\n\n'
        "[[generate]]\n"
        'generator = "passkey"\n'
        f"lengths = [{length}]\n"
        f"depths = [{', '.join(str(d) for d in depths)}]\n"
        f"per_cell = {per_cell}\n"
        'haystack = "noise"\n',
        encoding="utf-8",
    )
    return path


def freeze_for_model(suite: Path, out: Path, model: str = "smollm2-135m") -> Path:
    """Freeze `suite` for `model`'s tokenizer, as `kvgate freeze SUITE -o OUT --model MODEL` does."""
    from kvgate.models import model_folder, resolve_model
    from kvgate.workload.freeze import freeze
    from kvgate.workload.hf_tokenizer import HFPromptTokenizer

    spec = resolve_model(model)
    freeze([str(suite)], out, HFPromptTokenizer.from_folder(model_folder(spec), spec.name))
    return out


def synthetic_workload(out: Path, n_cases: int) -> str:
    """`n_cases` small cases (8 prompt tokens, four tasks, three length buckets); returns the sha256."""
    from kvgate.workload.case import Case
    from kvgate.workload.schema import write_workload

    tasks, buckets = ("passkey", "needle", "vt", "kv"), ("1k", "4k", "16k")
    cases = [
        Case(
            case_id=f"syn-{i:08d}",
            suite="bench-synthetic",
            task=tasks[i % 4],
            messages=({"role": "user", "content": f"Say {i}."},),
            max_new_tokens=4,
            validator="substring_all",
            expected=[str(i)],
            validator_args={},
            prefix_group=None,
            critical=i % 50 == 0,
            slices={"ctx_bucket": buckets[(i // 4) % 3], "depth_bucket": "middle"},
            prompt_token_ids=tuple(range(i % 7, i % 7 + 8)),
            n_prompt_tokens=8,
        )
        for i in range(n_cases)
    ]
    return write_workload(cases, out, {"suites": {}, "seed": 0, "tokenizer": "synthetic"})
