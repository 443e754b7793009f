"""Benchmark: `kvgate report` over one million result rows (target ≤ 3 s wall, ≤ 1 GiB RSS, 2 cores).

Synthesises a run in the store layout: a workload of 333,334 cases (three tasks × three context
buckets × three depths, 1% critical), a manifest, and 3 arms × 333,334 result rows (control, an eviction
and an FP8 arm) written with pyarrow as Parquet parts. Then times the report's model building in process
and `kvgate report RUN --format json` end to end in a fresh process (imports included), with its peak RSS.

    .venv/bin/python bench/bench_report.py [--cases 333334] [--dir DIR] [--repeat 3] [--strict]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kvgate.gate.policy import load_policy
from kvgate.runner.manifest import build_manifest, write_manifest
from kvgate.runner.store import RESULT_SCHEMA
from kvgate.treatments.matrix import parse_matrix
from kvgate.workload.case import Case
from kvgate.workload.schema import Workload, write_workload

TARGET_S, TARGET_RSS_MIB = 3.0, 1024
ARMS = ("full", "snapkv-50", "fp8-e4m3")
PART_ROWS = 50_000
MATRIX = '[matrix]\ncontrol = "full"\ncandidates = ["snapkv-50", "fp8-e4m3"]\naa_replicate = false\n'


def synthesise(root: Path, n_cases: int, seed: int = 0) -> Path:
    """Write workload, manifest and result parts under `root`; returns the run directory."""
    tasks, buckets, depths = ("passkey", "needle", "vt"), ("1k", "4k", "16k"), ("start", "middle", "end")
    tokens = {"1k": 1000, "4k": 4000, "16k": 16000}
    cases = [
        Case(
            case_id=f"bench-{i:07d}",
            suite="bench",
            task=tasks[i % 3],
            messages=({"role": "user", "content": "q"},),
            max_new_tokens=16,
            validator="substring",
            expected="a",
            validator_args={},
            prefix_group=None,
            critical=i % 100 == 0,
            slices={"ctx_bucket": buckets[(i // 3) % 3], "depth_bucket": depths[(i // 9) % 3]},
            n_prompt_tokens=tokens[buckets[(i // 3) % 3]],
        )
        for i in range(n_cases)
    ]
    workload_path = root / "bench.parquet"
    sha = write_workload(cases, workload_path, {"suite": "bench"})
    workload = Workload(cases=(), meta={}, sha256=sha, path=workload_path)
    (root / "matrix.toml").write_text(MATRIX)
    manifest = build_manifest(
        workload=workload,
        case_ids=[c.case_id for c in cases],
        model={"name": "bench-model"},
        engine={"engine": "fake", "version": "1"},
        matrix=parse_matrix(root / "matrix.toml"),
        policy=load_policy(None),
    )
    run_dir = root / "runs" / manifest["run_id"]
    run_dir.mkdir(parents=True, exist_ok=True)
    write_manifest(run_dir, manifest)
    rng = np.random.default_rng(seed)
    ids = pa.array([c.case_id for c in cases])
    prompt = np.array([c.n_prompt_tokens for c in cases], dtype=np.int32)
    control = rng.random(n_cases) < 0.9
    for a, arm in enumerate(ARMS):
        passed = control if a == 0 else control & (rng.random(n_cases) > 0.01 * a)
        passed = passed | (rng.random(n_cases) < 0.002)
        error = rng.random(n_cases) < 0.0005
        diverged = np.where(passed == control, rng.random(n_cases) < 0.05, True) & (a > 0)
        columns = {
            "case_id": ids,
            "arm": pa.array([arm] * n_cases),
            "replicate": pa.array(np.zeros(n_cases, np.int32)),
            "attempt": pa.array(np.zeros(n_cases, np.int32)),
            "output_text": pa.array(np.where(passed, "ok", "wrong")),
            "output_token_ids": pa.array([[]] * n_cases, type=pa.list_(pa.int32())),
            "passed": pa.array(passed & ~error),
            "fail_kind": pa.array(np.where(error, "engine_error", np.where(passed, None, "mismatch"))),
            "detail": pa.array([""] * n_cases),
            "n_prompt_tokens": pa.array(prompt),
            "n_cached_tokens": pa.array(np.zeros(n_cases, np.int32)),
            "n_kv_entries_kept": pa.array(prompt // (2 if a == 1 else 1)),
            "ttft_s": pa.array(rng.random(n_cases) * 0.1),
            "latency_s": pa.array(rng.random(n_cases)),
            "mean_logprob": pa.array(np.where(passed, -0.3, -1.2) + rng.normal(0, 0.3, n_cases)),
            "min_logprob": pa.array(np.full(n_cases, -5.0)),
            "first_divergence": pa.array(np.where(diverged, rng.integers(0, 16, n_cases), 0).astype(np.int32),
                                         mask=~diverged),
        }  # fmt: skip
        table = pa.table(columns, schema=RESULT_SCHEMA)
        arm_dir = run_dir / "results" / arm
        arm_dir.mkdir(parents=True, exist_ok=True)
        for p, start in enumerate(range(0, n_cases, PART_ROWS)):
            pq.write_table(table.slice(start, PART_ROWS), arm_dir / f"part-{p:05d}.parquet")
    return run_dir


def in_process(run_dir: Path, repeat: int) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of `build_report` per repetition, imports already done."""
    from kvgate.report.model import build_report

    times = []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        build_report(run_dir)
        times.append((time.perf_counter() - start, time.process_time() - cpu))
    return times


def _cpu(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def end_to_end(run_dir: Path) -> tuple[float, float, float, int]:
    """Wall and CPU seconds and peak RSS (MiB) of `kvgate report RUN --format json` in a fresh process."""
    kvgate = Path(sys.executable).with_name("kvgate")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [str(kvgate), "report", str(run_dir), "--format", "json", "-o", os.devnull],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=lambda: os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2]),
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1, 3, 4):
        raise SystemExit(f"kvgate report failed ({done.returncode}): {done.stderr.strip()}")
    return wall, _cpu(after) - _cpu(usage), after.ru_maxrss / 1024, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=333_334, help="cases per arm (3 arms)")
    parser.add_argument(
        "--dir", type=Path, default=None, help="keep the synthesised run here (reused if present)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])
    root = args.dir or Path(tempfile.mkdtemp(prefix="kvgate-bench-"))
    existing = sorted((root / "runs").glob("*/manifest.json")) if args.dir else []
    start = time.perf_counter()
    run_dir = existing[0].parent if existing else synthesise(root, args.cases)
    print(f"run: {run_dir} ({3 * args.cases:,} result rows; set-up {time.perf_counter() - start:.1f} s)")
    times = in_process(run_dir, args.repeat)
    runs = [end_to_end(run_dir) for _ in range(args.repeat)]
    wall, cpu, rss, code = min(runs)
    print("build_report in process (wall/CPU s): " + ", ".join(f"{w:.2f}/{c:.2f}" for w, c in times))
    print(f"kvgate report --format json, fresh process with imports (best of {args.repeat}): "
          f"{wall:.2f} s wall, "
          f"{cpu:.2f} s CPU, peak RSS {rss:.0f} MiB, exit {code}")  # fmt: skip
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"targets: ≤ {TARGET_S:.0f} s and ≤ {TARGET_RSS_MIB} MiB on 2 cores "
          f"({os.cpu_count()} CPUs here, using {len(os.sched_getaffinity(0))}; "
          f"load average {load})")  # fmt: skip
    ok = wall <= TARGET_S and rss <= TARGET_RSS_MIB
    print("PASS" if ok else "MISSED")
    return 0 if ok or not args.strict else 1


if __name__ == "__main__":
    raise SystemExit(main())
