"""Benchmark: `kvgate report` over one million result rows (target ≤ 3 s and ≤ 1 GiB RSS on 2 cores).

The run is synthesised in the store layout by `workloads.synthetic_run`: 250,000 cases under the default
matrix's shape (control, its A/A replicate and two candidates: 4 × 250,000 result rows), written in
1024-row Parquet parts with page checksums, as the runner writes them (MAX_PART_ROWS), plus the
workload and the manifest. Then `kvgate report RUN --format json` runs in fresh processes (imports
included); wall, CPU (user + system) and peak RSS come from `os.wait4`. The machine is shared, so CPU
seconds are the steadier figure: on an idle machine the wall time is at most about the CPU time.
The in-process `build_report` is profiled once, to show where the time goes.

The floor, in each repetition beside the report (the order rotating, with `--against` among the two
trees): a fresh process that imports
pyarrow and reads the columns the report reads (the verdicts' and the texts kept for failing examples)
of every part, one `ParquetFile.read` each, nothing checked or converted; the report's CPU seconds over
the floor's is the part of the report that is not reading its input.

With `--against TREE` (a checkout of another kvgate commit, e.g. `git worktree add --detach /tmp/base
<commit>`), every repetition also runs that tree's `kvgate report` on the same run (PYTHONPATH pointing
at it), the two alternating and the order rotating, so a load swing on the shared machine hits both:
the figure is the median of the per-repetition CPU ratios, and the two JSON reports must be
byte-identical.

    .venv/bin/python bench/bench_report.py [--quick] [--repeat N] [--keep DIR] [--against TREE]
"""

from __future__ import annotations

import argparse
import filecmp
import subprocess
import sys
import tempfile
from pathlib import Path

import common
from workloads import synthetic_run

TARGET_S, TARGET_RSS_MIB = 3.0, 1024
CASES, PART_ROWS, ARMS = 250_000, 1024, 4
FLOOR = """
import sys
from pathlib import Path
import pyarrow.parquet as pq
from kvgate.report.analysis.row_texts import TEXT_COLUMNS
from kvgate.report.analysis.run_data import RESULT_COLUMNS
for path in sorted(Path(sys.argv[1]).glob("results/*/part-*.parquet")):
    with pq.ParquetFile(path) as part:
        part.read(columns=[*RESULT_COLUMNS, *TEXT_COLUMNS], use_threads=False)
"""
"""The bare read: every part's report columns, one call each (the kvgate imports name the columns)."""


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
    parser.add_argument("--against", type=Path, default=None, help="another kvgate tree, run alternately")
    args = parser.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 7)
    load = common.load_average()
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-report-") as tmp:
        run_dir = run_dir_in(args.keep or Path(tmp))
        parts = sum(1 for _ in (run_dir / "results").glob("*/part-*.parquet"))
        argv_report = [common.KVGATE, "report", str(run_dir), "--format", "json", "-o", "/dev/null"]
        common.run_child(argv_report, 300)  # warm the page cache
        if args.against is not None:
            children, before, floors = alternated(run_dir, args.against.resolve(), repeat, Path(tmp))
        else:
            children, floors = beside_floor(argv_report, run_dir, repeat)
            before = []
        bad = [c for c in children + before if c.returncode not in (0, 1, 3, 4)]
        bad += [c for c in floors if c.returncode != 0]
        if bad:
            raise SystemExit(f"kvgate report failed ({bad[0].returncode}): {common.last_line(bad[0].stderr)}")
        from kvgate.report.analysis.build import build_report

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
        + (against_text(args.against, before, children) if before else "")
        + (floor_text(floors, children) if floors else "")
        + "\n\nWhere `build_report` spends its time in process (cProfile, one call):\n\n"
        + profile
        + "\n"
    )  # fmt: skip
    print(text)
    common.write_section(
        "report_1m",
        text,
        {
            "wall_s": walls, "cpu_s": cpus, "peak_rss_mib": rss, "rows": ARMS * CASES, "parts": parts,
            "against_cpu_s": [c.cpu_s for c in before], "against_wall_s": [c.wall_s for c in before],
            "floor_cpu_s": [c.cpu_s for c in floors],
        },
    )  # fmt: skip
    return 0


def floor_argv(run_dir: Path) -> list[str]:
    return [common.PYTHON, "-c", FLOOR, str(run_dir)]


def beside_floor(
    argv_report: list[str], run_dir: Path, repeat: int
) -> tuple[list[common.ChildRun], list[common.ChildRun]]:
    """(the report's runs, the bare read's): one of each per repetition, the order alternating."""
    reports, floors = [], []
    for i in range(repeat):
        for side in ("report", "floor") if i % 2 == 0 else ("floor", "report"):
            if side == "report":
                reports.append(common.run_child(argv_report, 300))
            else:
                floors.append(common.run_child(floor_argv(run_dir), 300))
    return reports, floors


def floor_text(floors: list[common.ChildRun], reports: list[common.ChildRun]) -> str:
    """The report's CPU seconds against the bare read's, per repetition."""
    ratios = [r.cpu_s / f.cpu_s for r, f in zip(reports, floors, strict=True)]
    rows = [
        ["CPU s (median)", f"{common.median([f.cpu_s for f in floors]):.2f}",
         f"{common.median([r.cpu_s for r in reports]):.2f}", f"**{common.median(ratios):.2f}×**"],
        ["each repetition: CPU s", ", ".join(f"{f.cpu_s:.2f}" for f in floors),
         ", ".join(f"{r.cpu_s:.2f}" for r in reports), ", ".join(f"{x:.2f}" for x in ratios)],
        ["peak RSS MiB (max)", f"{max(f.peak_rss_mib for f in floors):.0f}",
         f"{max(r.peak_rss_mib for r in reports):.0f}", ""],
    ]  # fmt: skip
    return (
        "\n\nBeside the floor (a fresh process reading every part's report columns with pyarrow, nothing "
        "checked or converted), in the same rotation of each repetition:\n\n"
        + common.table(["", "bare read", "kvgate report", "report ÷ read"], rows)
    )


def alternated(
    run_dir: Path, other: Path, repeat: int, tmp: Path
) -> tuple[list[common.ChildRun], list[common.ChildRun], list[common.ChildRun]]:
    """(this tree's runs, `other`'s runs, the bare read's): one of each per repetition, the order
    rotating; each repetition's two JSON reports must be byte-identical."""
    trees = {"this": common.REPO_ROOT, "other": other}
    runs: dict[str, list[common.ChildRun]] = {"this": [], "other": [], "floor": []}
    orders = [("this", "other", "floor"), ("other", "floor", "this"), ("floor", "this", "other")]
    for i in range(repeat):
        for side in orders[i % 3]:
            if side == "floor":
                runs["floor"].append(common.run_child(floor_argv(run_dir), 300))
                continue
            out = tmp / f"{side}.json"
            argv = [common.KVGATE, "report", str(run_dir), "--format", "json", "-o", str(out)]
            env = {"PYTHONPATH": str(trees[side])}
            runs[side].append(common.run_child(argv, 300, env=env))
        if not filecmp.cmp(tmp / "this.json", tmp / "other.json", shallow=False):
            raise SystemExit(f"the two trees' JSON reports differ (repetition {i + 1})")
    return runs["this"], runs["other"], runs["floor"]


def against_text(other: Path, before: list[common.ChildRun], after: list[common.ChildRun]) -> str:
    """The side-by-side table: the other tree's CPU seconds against this one's, per repetition."""
    ratios = [a.cpu_s / b.cpu_s for a, b in zip(after, before, strict=True)]
    cpu_b, cpu_a = common.median([c.cpu_s for c in before]), common.median([c.cpu_s for c in after])
    rows = [
        ["CPU s (median)", f"{cpu_b:.2f}", f"{cpu_a:.2f}", f"{cpu_a / cpu_b:.3f}×"],
        ["median of per-repetition CPU ratios", "", "", f"**{common.median(ratios):.3f}×**"],
        ["each repetition: CPU s", ", ".join(f"{c.cpu_s:.2f}" for c in before),
         ", ".join(f"{c.cpu_s:.2f}" for c in after), ", ".join(f"{r:.2f}" for r in ratios)],
        ["wall s (median)", f"{common.median([c.wall_s for c in before]):.2f}",
         f"{common.median([c.wall_s for c in after]):.2f}", ""],
        ["peak RSS MiB (max)", f"{max(c.peak_rss_mib for c in before):.0f}",
         f"{max(c.peak_rss_mib for c in after):.0f}", ""],
    ]  # fmt: skip
    git_argv = ["git", "-C", str(other), "log", "-1", "--format=%h%n%s"]
    git = subprocess.run(git_argv, capture_output=True, text=True, check=False)
    rev, _, subject = git.stdout.strip().partition("\n")
    rev = rev or str(other)
    return (
        f"\n\nSide by side with kvgate at {rev}{f' ({subject})' if subject else ''} (`--against`), the two "
        "alternating in each repetition; their JSON reports byte-identical in every repetition:\n\n"
        + common.table(["", f"before ({rev})", "this tree", "this ÷ before"], rows)
    )


if __name__ == "__main__":
    raise SystemExit(main())
