"""The Ray executor's scaling: the fake engine with a fixed per-case latency, 1 worker against 2, side by
side in one process on one local Ray cluster (2 CPUs; each worker holds one), repetitions alternating,
with the local executor beside them (what Ray's dispatch costs against generating in-process).

Measured per run: the generation wall (the executor's `execute`, after the first worker has started),
the whole `kvgate run` wall (workers' start-up included), and the dispatch overhead per work unit: the
generation wall times the workers, less the engine's own time (the rows' latency_s, summed), over the
units run (and per row, comparable with the local executor's). Target: 2 workers ≥ 1.8× faster than
1 at generation.

    .venv/bin/python bench/ray_scaling.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common
from workloads import scaled_suite

from kvgate.executors.local import LocalExecutor
from kvgate.executors.ray_executor import RayExecutor
from kvgate.rundir.store import read_results
from kvgate.runner.job import RunOptions, run_job

TARGET = 1.8
MATRIX = """[matrix]
control = "full"
candidates = ["streaming-50"]
aa_replicate = false
confirm_reruns = 0

[faults."*"]
latency_s = {latency}
"""
GENERATION: list[float] = []


def timed(execute: Callable[..., None]) -> Callable[..., None]:
    """`execute`, its wall seconds appended to GENERATION."""

    def run(self: Any, *args: Any, **kwargs: Any) -> None:
        start = time.perf_counter()
        try:
            execute(self, *args, **kwargs)
        finally:
            GENERATION.append(time.perf_counter() - start)

    return run


def one_run(workload: Path, matrix: Path, out: Path, workers: int) -> dict[str, Any]:
    """One run: on `workers` Ray workers, or with the local executor when `workers` is 0."""
    start = time.perf_counter()
    executor = RayExecutor(workers=workers) if workers else LocalExecutor()
    run_dir = run_job(
        RunOptions(workload=workload, matrix=str(matrix), engine="fake", runs_dir=out), executor
    )
    wall = time.perf_counter() - start
    generation = GENERATION[-1]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    units = sum(e["units"] for arm in manifest["hardware"].values() for e in arm)
    engine_s = sum(read_results(run_dir, ["latency_s"])["latency_s"].to_pylist())
    rows = read_results(run_dir, ["case_id"]).num_rows
    overhead = generation * max(1, workers) - engine_s
    return {"wall_s": wall, "generation_s": generation, "units": units, "rows": rows, "engine_s": engine_s,
            "overhead_per_unit_s": overhead / units if units else None,
            "overhead_per_row_s": overhead / rows}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    import ray

    load_before = common.load_average()
    latency, reps = (0.01, 1) if args.quick else (0.05, 3)
    RayExecutor.execute = timed(RayExecutor.execute)  # type: ignore[method-assign]
    LocalExecutor.execute = timed(LocalExecutor.execute)  # type: ignore[method-assign]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    runs: dict[int, list[dict[str, Any]]] = {0: [], 1: [], 2: []}
    try:
        with tempfile.TemporaryDirectory() as tmp_dir:
            tmp = Path(tmp_dir)
            workload = scaled_suite(tmp, "ruler")
            matrix = tmp / "matrix.toml"
            matrix.write_text(MATRIX.format(latency=latency))
            for rep in range(reps):
                for workers in (0, 1, 2) if rep % 2 == 0 else (2, 1, 0):
                    runs[workers].append(one_run(workload, matrix, tmp / f"r{rep}w{workers}", workers))
    finally:
        ray.shutdown()
    med = {
        w: {k: common.median([r[k] for r in rs if r[k] is not None]) for k in rs[0]} for w, rs in runs.items()
    }
    speedup = med[1]["generation_s"] / med[2]["generation_s"]
    wall_speedup = med[1]["wall_s"] / med[2]["wall_s"]
    per_rep = [a["generation_s"] / b["generation_s"] for a, b in zip(runs[1], runs[2], strict=True)]
    rows = []
    for w, m in med.items():
        each = ", ".join(f"{r['generation_s']:.2f}" for r in runs[w])
        side = f"Ray, {w} worker{'s' if w > 1 else ''}" if w else "local executor"
        per_unit = f"{1000 * m['overhead_per_unit_s']:.1f} ms" if w else "— (a pass each)"
        rows.append([
            side, f"{m['generation_s']:.2f} s", f"{m['wall_s']:.2f} s", int(m["units"]) if w else "—",
            int(m["rows"]), f"{m['engine_s']:.2f} s", per_unit,
            f"{1000 * m['overhead_per_row_s']:.2f} ms", each,
        ])  # fmt: skip
    header = [
        "side", "generation wall (median)", "run wall (median)", "units", "rows", "engine seconds",
        "overhead / unit", "overhead / row", "each repetition (generation, s)",
    ]  # fmt: skip
    md = (
        "## Ray executor: 1 worker against 2 (fake engine, fixed latency per case)\n\n"
        + common.provenance([sys.executable, *sys.argv], load_before)
        + f"- workload: `ruler` ({int(med[1]['rows']) // 2} cases), control and streaming-50, "
        f"latency_s = {latency} per case, batch size 1; a local Ray cluster of 2 CPUs (one per worker), "
        f"{reps} repetition(s) per side, alternating\n"
        f"- target: 2 workers ≥ {TARGET}× faster than 1 at generation: median {speedup:.2f}× "
        f"(per repetition: {', '.join(f'{x:.2f}' for x in per_rep)}) → {common.verdict(speedup >= TARGET)}; "
        f"whole run, workers' start-up included: {wall_speedup:.2f}×\n"
        "- overhead: generation wall × workers − the engine's own seconds (the rows' latency_s), per unit "
        "and per row: sending a unit's batches, taking its rows back, validating them and storing parts "
        "(the local executor validates and stores the same), and any worker idle at the phase barrier "
        "between the control and the candidates\n"
        f"- Ray with 1 worker against the local executor, generation wall: "
        f"{med[1]['generation_s'] / med[0]['generation_s']:.3f}×\n\n" + common.table(header, rows)
    )
    common.write_section("ray_scaling", md, {"runs": runs, "speedup": speedup, "target": TARGET})
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
