"""Benchmark: `kvgate report` over one million result rows (target ≤ 3 s and ≤ 1 GiB RSS on 2 cores).

The run is synthesised in the store layout by `workloads.synthetic_run`: 250,000 cases under the default
matrix's shape (control, its A/A replicate and two candidates: 4 × 250,000 result rows), written in
1024-row Parquet parts with page checksums, as the runner writes them (MAX_PART_ROWS), plus the
workload and the manifest. Then `kvgate report RUN --format json` runs in fresh processes (imports
included); wall, CPU (user + system) and peak RSS come from `os.wait4`. The machine is shared, so CPU
seconds are the steadier figure: on an idle machine the wall time is at most about the CPU time.
The in-process `build_report` is profiled once, to show where the time goes.

Beside it, in each repetition, the same run as `kvgate run` leaves a complete run: a copy whose parts of
each arm are merged into one at the end of its passes (rundir.store.compact; here one part per arm). Its
JSON report must be byte-identical to the small parts' one: the same rows in fewer, larger parts, so the
difference is the cost of opening and checking each of the 980 parts.

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
import shutil
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


COMPACT = """
import json, sys
from pathlib import Path
from kvgate.rundir.store import compact
copy = Path(sys.argv[1])
for arm in json.loads((copy / "manifest.json").read_text(encoding="utf-8"))["arms"]:
    compact(copy, arm)
"""
"""Merges each arm's parts of a run copy into one (rundir.store.compact, as `kvgate run` does when a pass
ends); in a child process, so that this one stays small (a child's peak RSS counts its parent's at fork)."""


def compacted_copy(run_dir: Path, into: Path) -> Path:
    """A copy of `run_dir` under `into` with each arm's parts merged into one, as `kvgate run` merges them
    when a pass ends (the copy is this benchmark's own, so no lock is taken)."""
    copy = into / "compacted" / run_dir.name
    shutil.copytree(run_dir, copy)
    merged = common.run_child([common.PYTHON, "-c", COMPACT, str(copy)], 300)
    if merged.returncode != 0:
        raise SystemExit(f"compacting the run's copy failed: {common.last_line(merged.stderr)}")
    return copy


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
        compacted = compacted_copy(run_dir, Path(tmp))
        compacted_parts = sum(1 for _ in (compacted / "results").glob("*/part-*.parquet"))
        common.run_child(argv_report, 300)  # warm the page cache
        if args.against is not None:
            runs = alternated(run_dir, compacted, args.against.resolve(), repeat, Path(tmp))
        else:
            runs = beside_floor(run_dir, compacted, repeat, Path(tmp))
        children, before, floors, merged = (
            runs["this"],
            runs.get("other", []),
            runs["floor"],
            runs["compacted"],
        )
        bad = [c for c in children + before + merged if c.returncode not in (0, 1, 3, 4)]
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
        + compacted_text(merged, children, compacted_parts, parts)
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
            "compacted_cpu_s": [c.cpu_s for c in merged], "compacted_parts": compacted_parts,
            "compacted_peak_rss_mib": max(c.peak_rss_mib for c in merged),
        },
    )  # fmt: skip
    return 0


def floor_argv(run_dir: Path) -> list[str]:
    return [common.PYTHON, "-c", FLOOR, str(run_dir)]


def beside_floor(run_dir: Path, compacted: Path, repeat: int, tmp: Path) -> dict[str, list[common.ChildRun]]:
    """This tree's report runs on the run and on its compacted copy, and the bare read's: one of each per
    repetition, the order rotating; each repetition's two JSON reports must be byte-identical."""
    return sides(run_dir, compacted, {"this": common.REPO_ROOT}, repeat, tmp)


def report_argv(run_dir: Path, out: Path) -> list[str]:
    return [common.KVGATE, "report", str(run_dir), "--format", "json", "-o", str(out)]


def sides(
    run_dir: Path, compacted: Path, trees: dict[str, Path], repeat: int, tmp: Path
) -> dict[str, list[common.ChildRun]]:
    """Each tree's report on the run, this tree's on the compacted copy, and the bare read: one of each
    per repetition in `common.rotated` order; a repetition's JSON reports must all be byte-identical."""
    names = [*trees, "compacted", "floor"]
    runs: dict[str, list[common.ChildRun]] = {name: [] for name in names}
    for i in range(repeat):
        for side in common.rotated(names, i):
            if side == "floor":
                runs["floor"].append(common.run_child(floor_argv(run_dir), 300))
                continue
            tree, run = (common.REPO_ROOT, compacted) if side == "compacted" else (trees[side], run_dir)
            env = {"PYTHONPATH": str(tree)}
            runs[side].append(common.run_child(report_argv(run, tmp / f"{side}.json"), 300, env=env))
        for side in names[1:-1]:
            if not filecmp.cmp(tmp / "this.json", tmp / f"{side}.json", shallow=False):
                raise SystemExit(f"the JSON reports of this tree and {side} differ (repetition {i + 1})")
    return runs


def paired_rows(base: list[common.ChildRun], other: list[common.ChildRun]) -> list[list[str]]:
    """Table rows of two sides measured in the same repetitions: CPU s medians and each repetition's,
    with `other` ÷ `base` per repetition, and each side's peak RSS."""
    ratios = [o.cpu_s / b.cpu_s for b, o in zip(base, other, strict=True)]
    return [
        ["CPU s (median)", f"{common.median([b.cpu_s for b in base]):.2f}",
         f"{common.median([o.cpu_s for o in other]):.2f}", f"**{common.median(ratios):.2f}×**"],
        ["each repetition: CPU s", ", ".join(f"{b.cpu_s:.2f}" for b in base),
         ", ".join(f"{o.cpu_s:.2f}" for o in other), ", ".join(f"{x:.2f}" for x in ratios)],
        ["peak RSS MiB (max)", f"{max(b.peak_rss_mib for b in base):.0f}",
         f"{max(o.peak_rss_mib for o in other):.0f}", ""],
    ]  # fmt: skip


def floor_text(floors: list[common.ChildRun], reports: list[common.ChildRun]) -> str:
    """The report's CPU seconds against the bare read's, per repetition."""
    rows = paired_rows(floors, reports)
    return (
        "\n\nBeside the floor (a fresh process reading every part's report columns with pyarrow, nothing "
        "checked or converted), in the same rotation of each repetition:\n\n"
        + common.table(["", "bare read", "kvgate report", "report ÷ read"], rows)
    )


def alternated(
    run_dir: Path, compacted: Path, other: Path, repeat: int, tmp: Path
) -> dict[str, list[common.ChildRun]]:
    """`beside_floor` with `other`'s report on the run as well (PYTHONPATH pointing at that tree)."""
    return sides(run_dir, compacted, {"this": common.REPO_ROOT, "other": other}, repeat, tmp)


def compacted_text(
    merged: list[common.ChildRun], reports: list[common.ChildRun], merged_parts: int, parts: int
) -> str:
    """The compacted copy's report against the small parts' one, per repetition."""
    rows = paired_rows(reports, merged)
    return (
        "\n\nThe same run as `kvgate run` leaves it (each arm's parts merged when its passes end: "
        f"{merged_parts} parts), this tree, in the same rotation of each repetition; its JSON report "
        "byte-identical:\n\n"
        + common.table(
            ["", f"{parts} parts of ≤ {PART_ROWS} rows", f"{merged_parts} merged parts", "merged ÷ small"],
            rows,
        )
    )


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
