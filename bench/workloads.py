"""Workloads the benchmarks run on: passkey suites written on the fly, and synthetic workloads of any size.

`passkey_suite` writes a suite spec (TOML) of `cases` passkey cases at one length, frozen the ordinary way
(`kvgate freeze`, or `freeze_for_model` for the embedded tokenizer). `synthetic_workload` skips the
generators for the growth benchmark's run and report measurements: n cases with tiny prompts and a
substring validator, written by `write_workload` (so hashed and readable like any frozen workload).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def scaled_suite(tmp: Path, name: str, factor: int = 1) -> Path:
    """A shipped generator suite with every cell's case count (`per_cell` 2 or 4) multiplied by `factor`,
    frozen with the word tokenizer (the slice structure does not depend on the model)."""
    from kvgate.shipped import suites_dir
    from kvgate.workload.freeze import freeze
    from kvgate.workload.tokenizer import WordTokenizer

    text = (suites_dir() / f"{name}.toml").read_text()
    if factor != 1:
        for per_cell in (2, 4):
            text = text.replace(f"per_cell = {per_cell}\n", f"per_cell = {per_cell * factor}\n")
        text = text.replace(f'name = "{name}"', f'name = "{name}-x{factor}"')
    suite = tmp / f"{name}-x{factor}.toml"
    suite.write_text(text)
    out = tmp / f"{name}-x{factor}.parquet"
    freeze([str(suite)], out, WordTokenizer(), seed=0)
    return out


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


GROWTH_MATRIX = (
    "# The default matrix's shape: control, its A/A replicate and two candidates (4 result rows per case).\n"
    '[matrix]\ncontrol = "full"\ncandidates = ["streaming-50", "fp8-e4m3"]\naa_replicate = true\n'
)
GROWTH_ARMS = (("full", 0), ("full", 1), ("streaming-50", 0), ("fp8-e4m3", 0))


def proof_columns(arm: str, n_cases: int, kept: int, n_output: int) -> dict[str, Any]:
    """The treatment counters the fake engine stores for the growth matrix's arms (bfloat16 KV; FP8 half
    the bytes, every prompt and output entry quantised; no tier, no spans)."""
    import numpy as np
    import pyarrow as pa

    from kvgate.engines.fake import KV_BYTES_PER_ENTRY

    fp8 = arm == "fp8-e4m3"
    zeros = pa.array(np.zeros(n_cases, np.int32))
    return {
        "kv_bytes": pa.array(np.full(n_cases, kept * KV_BYTES_PER_ENTRY // (2 if fp8 else 1), np.int64)),
        "kv_dtype": pa.array(["fp8_e4m3" if fp8 else "bfloat16"] * n_cases),
        "n_kv_quantized": pa.array(np.full(n_cases, kept + n_output if fp8 else 0, np.int32)),
        "n_tier_written": zeros,
        "n_tier_read": zeros,
        "n_spans_reused": zeros,
    }


def synthetic_run(root: Path, n_cases: int, rows_per_part: int, seed: int = 0) -> Path:
    """A run directory as `kvgate run --engine fake` leaves it for GROWTH_MATRIX, without generating.

    The workload is `synthetic_workload`; the manifest is built by the runner's own `build_manifest`;
    each arm's rows are written as Parquet parts of `rows_per_part` rows with page checksums, as the
    store writes them. About 2% of candidate rows fail (a cache-induced failure rate for the report to
    bound), 0.05% are engine errors. Returns the run directory.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kvgate.gate.policy import load_policy
    from kvgate.rundir.manifest import build_manifest, write_manifest
    from kvgate.rundir.part_index import binding, entry, key_of, write_index
    from kvgate.rundir.result_part import (
        CERTIFICATE_COLUMNS,
        RESULT_SCHEMA,
        RESULT_SCHEMA_VERSION,
        RESULT_VERSION_KEY,
    )
    from kvgate.treatments.matrix import parse_matrix_text
    from kvgate.workload.schema import Workload

    workload_path = root / "workload.parquet"
    sha = synthetic_workload(workload_path, n_cases)
    ids = [f"syn-{i:08d}" for i in range(n_cases)]
    matrix = parse_matrix_text(GROWTH_MATRIX, "bench-growth", "bench growth matrix")
    workload = Workload(cases=(), meta={}, sha256=sha, path=workload_path.resolve())
    manifest = build_manifest(
        workload, ids, {"name": "smollm2-135m"}, {"engine": "fake", "version": "2"}, matrix, load_policy(None)
    )
    run_dir = root / "runs" / manifest["run_id"]
    write_manifest(run_dir, manifest)
    rng = np.random.default_rng(seed)
    listed: dict[str, dict[str, Any]] = {}
    answers = pa.array([str(i) for i in range(n_cases)])
    for arm, replicate in GROWTH_ARMS:
        control = arm == "full"
        passed = rng.random(n_cases) >= (0.0 if control else 0.02)
        error = rng.random(n_cases) < 0.0005
        fail_kind = pa.array(np.where(error, "engine_error", "mismatch"), mask=passed & ~error)
        columns = {
            "case_id": pa.array(ids),
            "arm": pa.array([arm] * n_cases),
            "replicate": pa.array(np.full(n_cases, replicate, np.int32)),
            "attempt": pa.array(np.zeros(n_cases, np.int32)),
            "output_text": answers,
            "output_token_ids": pa.array([[7, 8]] * n_cases, type=pa.list_(pa.int32())),
            "passed": pa.array(passed & ~error),
            "fail_kind": fail_kind,
            "detail": pa.array([None] * n_cases, type=pa.string()),
            "n_prompt_tokens": pa.array(np.full(n_cases, 8, np.int32)),
            "n_cached_tokens": pa.array(np.zeros(n_cases, np.int32)),
            "n_kv_entries_kept": pa.array(np.full(n_cases, 4 if arm == "streaming-50" else 8, np.int32)),
            "ttft_s": pa.array(rng.random(n_cases) * 1e-4),
            "latency_s": pa.array(rng.random(n_cases) * 2e-4),
            "mean_logprob": pa.array(np.full(n_cases, -0.1)),
            "min_logprob": pa.array(np.full(n_cases, -0.5)),
            "first_divergence": pa.array(
                np.where(passed | control, -1, 0).astype(np.int32), mask=passed | control
            ),
            **{c: pa.nulls(n_cases, pa.float64()) for c in CERTIFICATE_COLUMNS},
            **proof_columns(arm, n_cases, kept=4 if arm == "streaming-50" else 8, n_output=2),
        }
        table = pa.table(columns, schema=RESULT_SCHEMA)
        table = table.replace_schema_metadata(
            {**binding(manifest["run_id"], arm), RESULT_VERSION_KEY: str(RESULT_SCHEMA_VERSION).encode()}
        )
        arm_dir = run_dir / "results" / arm
        arm_dir.mkdir(parents=True, exist_ok=True)
        first = len(list(arm_dir.glob("part-*.parquet")))
        for p, start in enumerate(range(0, n_cases, rows_per_part)):
            part = arm_dir / f"part-{first + p:05d}.parquet"
            chunk = table.slice(start, rows_per_part)
            pq.write_table(chunk, part, write_page_checksum=True)
            listed[key_of(run_dir / "results", part)] = entry(part, chunk.num_rows)
    write_index(run_dir / "results", manifest["run_id"], listed)  # as the store lists what it writes
    return run_dir


SUPPORT_SYSTEM_PROMPT = "You are the support assistant of Example Corp. " + " ".join(
    f"Rule {i} applies." for i in range(35)
)


def shared_prompt_trace(folder: Path, keys: str = "") -> Path:
    """20 requests of their own (about 300 words) behind one 150-word system prompt (34% of each prompt),
    written as a trace and frozen by trace import with the `[[trace]]` entry's extra `keys` (e.g.
    "prefix_min_share = 0"); returns the frozen workload's path."""
    import json

    from kvgate.workload.freeze import freeze
    from kvgate.workload.tokenizer import WordTokenizer

    def ticket(i: int) -> str:
        return f"Ticket {i}: " + " ".join(f"item{i}x{j} broke." for j in range(90))

    records = [
        {
            "messages": [
                {"role": "system", "content": SUPPORT_SYSTEM_PROMPT},
                {"role": "user", "content": ticket(i)},
            ],
            "expected": f"order {i}",
        }
        for i in range(20)
    ]
    (folder / "support.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    suite = folder / "bot.toml"
    suite.write_text(f'name = "bot"\n[[trace]]\npath = "support.jsonl"\nvalidator = "exact"\n{keys}')
    workload = folder / "w.parquet"
    freeze([str(suite)], workload, WordTokenizer(), seed=0)
    return workload
