"""Benchmark: `kvgate report` over one million result rows (target ≤ 3 s and ≤ 1 GiB RSS on 2 cores).

The run is synthesised in the store layout by `workloads.synthetic_run`: 250,000 cases under the default
matrix's shape (control, its A/A replicate and two candidates: 4 × 250,000 result rows), written in
1024-row Parquet parts with page checksums, as the runner writes them (MAX_PART_ROWS), plus the
workload and the manifest. Then `kvgate report RUN --format json` runs in fresh processes (imports
included); wall, CPU (user + system) and peak RSS come from `os.wait4`. The machine is shared, so CPU
seconds are the steadier figure: on an idle machine the wall time is at most about the CPU time.
The in-process `build_report` is profiled once, to show where the time goes.

    .venv/bin/python bench/bench_report.py [--quick] [--repeat N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import common
from workloads import synthetic_run

TARGET_S, TARGET_RSS_MIB = 3.0, 1024
CASES, PART_ROWS, ARMS = 250_000, 1024, 4


def run_dir_in(root: Path) -> Path:
    """The synthesised run under `root`, made once (reused when `root` already holds it)."""
    existing = sorted((root / "runs").glob("*/manifest.json"))
    return existing[0].parent if existing else synthetic_run(root, CASES, PART_ROWS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="3 repetitions instead of 7")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="synthesise into (or reuse) this folder")
    args = parser.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 7)
    load = common.load_average()
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-report-") as tmp:
        run_dir = run_dir_in(args.keep or Path(tmp))
        parts = sum(1 for _ in (run_dir / "results").glob("*/part-*.parquet"))
        argv_report = [common.KVGATE, "report", str(run_dir), "--format", "json", "-o", "/dev/null"]
        common.run_child(argv_report, 300)  # warm the page cache
        children = [common.run_child(argv_report, 300) for _ in range(repeat)]
        bad = [c for c in children if c.returncode not in (0, 1, 3, 4)]
        if bad:
            raise SystemExit(f"kvgate report failed ({bad[0].returncode}): {common.last_line(bad[0].stderr)}")
        from kvgate.report.model import build_report

        _, profile, _ = common.profile_call_table(lambda: build_report(run_dir), top=10)
    walls = [c.wall_s for c in children]
    cpus = [c.cpu_s for c in children]
    rss = max(c.peak_rss_mib for c in children)
    wall, cpu = common.median(walls), common.median(cpus)
    target = f"≤ {TARGET_S:g}"
    rows = [
        ["wall s", f"{wall:.2f}", f"{min(walls):.2f}", target, common.verdict(wall <= TARGET_S)],
        ["CPU s (user + system)", f"{cpu:.2f}", f"{min(cpus):.2f}", target, common.verdict(cpu <= TARGET_S)],
        ["peak RSS MiB", f"{rss:.0f}", "", f"≤ {TARGET_RSS_MIB}", common.verdict(rss <= TARGET_RSS_MIB)],
    ]
    text = (
        "## Report over one million result rows\n\n"
        + common.provenance([common.PYTHON, __file__, *(argv if argv is not None else sys.argv[1:])], load)
        + f"- run: {CASES:,} synthetic cases × {ARMS} arm passes = {ARMS * CASES:,} result rows in {parts} "
        f"parts of ≤ {PART_ROWS} rows; `kvgate report RUN --format json -o /dev/null`, {repeat} fresh "
        "processes after one warm-up (imports included)\n"
        f"- each wall s: {', '.join(f'{w:.2f}' for w in walls)}; "
        f"each CPU s: {', '.join(f'{c:.2f}' for c in cpus)}\n\n"
        + common.table(["", "median", "best", "target", "median vs target"], rows)
        + "\n\nWhere `build_report` spends its time in process (cProfile, one call):\n\n"
        + profile
        + "\n"
    )  # fmt: skip
    print(text)
    common.write_section(
        "report_1m",
        text,
        {"wall_s": walls, "cpu_s": cpus, "peak_rss_mib": rss, "rows": ARMS * CASES, "parts": parts},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
