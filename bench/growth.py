"""Growth: wall time and peak RSS of `kvgate freeze`, `kvgate run --engine fake` and `kvgate report`
at 10³ … 10⁶ result rows, each measurement a fresh process (peak RSS from os.wait4).

- freeze: N passkey cases of 128 words (the model-free word tokenizer), so N workload rows;
- run: the fake engine on N/4 synthetic cases under the default matrix's shape (control, A/A replicate,
  two candidates), so N result rows; `--quiet` still builds the report at the end;
- report: `kvgate report RUN --format json` on the run just made; at sizes the run was not measured at,
  on a synthesised run directory (`workloads.synthetic_run`) whose parts have the size the largest real
  run's parts had (the report's cost depends on the number of parts too).

Freeze and run at 10⁶ rows take many minutes on 2 shared cores: by default they are measured up to 10⁵
and projected to 10⁶ from the marginal cost of the last decade (`--max-freeze`, `--max-run` raise that).

    .venv/bin/python bench/growth.py [--quick] [--max-freeze N] [--max-run N] [--no-profile]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import common
from workloads import GROWTH_ARMS, GROWTH_MATRIX, passkey_suite, synthetic_run, synthetic_workload

SIZES = (1_000, 10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000)
REPORT_TARGET_S, REPORT_TARGET_MIB, TARGET_ROWS = 3.0, 1024.0, 1_000_000
GATE_EXITS = (0, 1, 3)
"""Exit codes of a run or report that finished (pass, fail, inconclusive)."""
TIMEOUT_S = 3600.0


@dataclass
class Point:
    op: str
    rows: int
    wall_s: float
    peak_rss_mib: float
    cpu_s: float
    how: str
    """measured | synthetic run | projected"""


def measure_freeze(n: int, root: Path) -> Point:
    suite = passkey_suite(root / f"freeze-{n}.toml", n, 128, name=f"growth-{n}")
    out = root / f"freeze-{n}.parquet"
    child = _checked(common.run_child([common.KVGATE, "freeze", str(suite), "-o", str(out)], TIMEOUT_S), (0,))
    return Point("freeze", n, child.wall_s, child.peak_rss_mib, child.cpu_s, "measured")


def measure_run(rows: int, root: Path) -> tuple[Point, Path]:
    cases = rows // len(GROWTH_ARMS)
    where = root / f"run-{rows}"
    where.mkdir()
    workload = where / "workload.parquet"
    synthetic_workload(workload, cases)
    matrix = where / "matrix.toml"
    matrix.write_text(GROWTH_MATRIX, encoding="utf-8")
    policy = where / "policy.toml"  # its 1-in-50 critical cases are too few to pass at small sizes
    policy.write_text("allow_unwinnable = true\n", encoding="utf-8")
    argv = [common.KVGATE, "run", "-w", str(workload), "-m", str(matrix), "--engine", "fake"]
    argv += ["--policy", str(policy)]
    child = _checked(common.run_child([*argv, "-o", str(where / "runs"), "--quiet"], TIMEOUT_S), GATE_EXITS)
    (run_dir,) = [p.parent for p in (where / "runs").glob("*/manifest.json")]
    return Point("run", rows, child.wall_s, child.peak_rss_mib, child.cpu_s, "measured"), run_dir


def measure_report(rows: int, run_dir: Path, how: str, repeat: int = 3) -> Point:
    """Median wall of `repeat` fresh processes; the largest peak RSS of them."""
    argv = [common.KVGATE, "report", str(run_dir), "--format", "json", "-o", os.devnull]
    children = [_checked(common.run_child(argv, TIMEOUT_S), GATE_EXITS) for _ in range(repeat)]
    return Point(
        "report",
        rows,
        common.median([c.wall_s for c in children]),
        max(c.peak_rss_mib for c in children),
        common.median([c.cpu_s for c in children]),
        how,
    )


def _checked(child: common.ChildRun, ok: tuple[int, ...]) -> common.ChildRun:
    if child.timed_out or child.returncode not in ok:
        raise RuntimeError(f"exit {child.returncode}: {common.last_line(child.stderr) or 'timed out'}")
    return child


def part_rows(run_dir: Path) -> int:
    """Median rows per result part of a stored run."""
    import pyarrow.parquet as pq

    sizes = [pq.ParquetFile(p).metadata.num_rows for p in run_dir.glob("results/*/part-*.parquet")]
    return int(common.median(sizes)) if sizes else 1024


def project(points: list[Point], rows: int) -> Point:
    """Linear from the marginal cost of the last measured decade (RSS likewise, never below the last)."""
    a, b = points[-2], points[-1]
    per_row = (b.wall_s - a.wall_s) / (b.rows - a.rows)
    rss_per_row = max(0.0, (b.peak_rss_mib - a.peak_rss_mib) / (b.rows - a.rows))
    return Point(
        b.op,
        rows,
        b.wall_s + per_row * (rows - b.rows),
        b.peak_rss_mib + rss_per_row * (rows - b.rows),
        b.cpu_s * rows / b.rows,
        "projected",
    )


def growth_exponent(points: list[Point]) -> float | None:
    """log-log slope of the marginal wall (start-up removed) over the measured points, None if < 3 points.

    The start-up is estimated as what the smallest size costs beyond its own marginal share."""
    measured = [p for p in points if p.how != "projected"]
    if len(measured) < 3:
        return None
    (a, b), c = measured[-3:-1], measured[-1]
    first, last = (b.wall_s - a.wall_s) / (b.rows - a.rows), (c.wall_s - b.wall_s) / (c.rows - b.rows)
    if first <= 0 or last <= 0:
        return None
    # constant marginal cost per row ⇒ exponent 1; a marginal cost that grows tenfold a decade ⇒ 2
    return 1.0 + math.log(last / first) / math.log((c.rows + b.rows) / (b.rows + a.rows))


def run_growth(sizes: tuple[int, ...], max_freeze: int, max_run: int, root: Path) -> list[Point]:
    points: list[Point] = []
    for n in sizes:
        if n <= max_freeze:
            points.append(measure_freeze(n, root))
            print(
                f"  freeze {n:>9,}: {points[-1].wall_s:7.2f} s, {points[-1].peak_rss_mib:6.0f} MiB",
                flush=True,
            )
    runs: dict[int, Path] = {}
    for n in sizes:
        if n <= max_run:
            point, runs[n] = measure_run(n, root)
            points.append(point)
            print(f"  run    {n:>9,}: {point.wall_s:7.2f} s, {point.peak_rss_mib:6.0f} MiB", flush=True)
    rows_per_part = part_rows(runs[max(runs)]) if runs else 1024
    for n in sizes:
        if n in runs:
            point = measure_report(n, runs[n], "measured")
        else:
            synth = root / f"synthetic-{n}"
            synth.mkdir()
            point = measure_report(
                n, synthetic_run(synth, n // len(GROWTH_ARMS), rows_per_part), "synthetic run"
            )
        points.append(point)
        print(
            f"  report {n:>9,}: {point.wall_s:7.2f} s, {point.peak_rss_mib:6.0f} MiB ({point.how})",
            flush=True,
        )
    for op in ("freeze", "run"):
        mine = [p for p in points if p.op == op]
        if len(mine) >= 2:
            points += [project(mine, n) for n in sizes if n > mine[-1].rows]
    return sorted(points, key=lambda p: (("freeze", "run", "report").index(p.op), p.rows))


def profile_run(root: Path, rows: int = 10_000) -> str:
    """cProfile of `kvgate run --engine fake` in process at `rows` result rows: where each row's time goes."""
    from kvgate.executors.local import LocalExecutor
    from kvgate.runner.job import RunOptions, run_job

    where = root / f"profile-run-{rows}"
    where.mkdir()
    synthetic_workload(where / "workload.parquet", rows // len(GROWTH_ARMS))
    (where / "matrix.toml").write_text(GROWTH_MATRIX, encoding="utf-8")
    opts = RunOptions(
        workload=where / "workload.parquet", matrix=str(where / "matrix.toml"), engine="fake", runs_dir=where
    )
    wall, top, _ = common.profile_call_table(lambda: run_job(opts, LocalExecutor()))
    return f"cProfile of the run at {rows:,} result rows, in process ({wall:.1f} s profiled):\n\n{top}\n"


BIG_PARTS = 50_000


def report_by_part_size(root: Path, rows: int, small_parts: int) -> tuple[str, list[Point]]:
    """The report at `rows` rows, once in parts as small as a real run's, once in BIG_PARTS-row parts:
    how much of its time is the number of part files rather than the number of rows."""
    points = []
    for per_part in (small_parts, BIG_PARTS):
        synth = root / f"parts-{per_part}"
        synth.mkdir()
        run_dir = synthetic_run(synth, rows // len(GROWTH_ARMS), per_part)
        n_parts = len(list(run_dir.glob("results/*/part-*.parquet")))
        points.append(measure_report(rows, run_dir, f"{n_parts} parts of ≤ {per_part:,} rows"))
    table = common.table(
        ["result parts", "wall s", "CPU s", "peak RSS MiB"],
        [[p.how, f"{p.wall_s:.2f}", f"{p.cpu_s:.2f}", f"{p.peak_rss_mib:.0f}"] for p in points],
    )
    title = f"`kvgate report` at {rows:,} rows by the size of its result parts (same rows, fresh processes)"
    return f"{title}:\n\n{table}\n", points


def profile_report(run_dir: Path) -> str:
    from kvgate.report.analysis.build import build_report
    from kvgate.report.render.formats import render_json

    wall, top, _ = common.profile_call_table(lambda: render_json(build_report(run_dir)))
    return f"cProfile of the report (model and JSON), in process ({wall:.1f} s profiled):\n\n{top}\n"


def section(points: list[Point], argv: list[str], load: str, profiles: list[str], rows_per_part: int) -> str:
    rows = []
    for p in points:
        per_row = ""
        same = [q for q in points if q.op == p.op and q.rows < p.rows]
        if same:
            prev = same[-1]
            per_row = f"{(p.wall_s - prev.wall_s) / (p.rows - prev.rows) * 1e6:.1f}"
        rows.append(
            [
                p.op,
                f"{p.rows:,}",
                f"{p.wall_s:.2f}",
                f"{p.peak_rss_mib:.0f}",
                f"{p.cpu_s:.2f}",
                per_row,
                p.how,
            ]
        )
    exps = []
    for op in ("freeze", "run", "report"):
        e = growth_exponent([p for p in points if p.op == op])
        exps.append(f"{op} {e:.2f}" if e is not None else f"{op} n/a (fewer than 3 measured sizes)")
    top = next((p for p in points if p.op == "report" and p.rows == TARGET_ROWS), None)
    ok = None if top is None else top.wall_s <= REPORT_TARGET_S and top.peak_rss_mib <= REPORT_TARGET_MIB
    cpu_ok = None if top is None else top.cpu_s <= REPORT_TARGET_S and top.peak_rss_mib <= REPORT_TARGET_MIB
    body = (
        "## Growth: freeze, run (fake engine) and report by result rows\n\n"
        + common.provenance(argv, load)
        + "- each figure is one fresh process (report: the median of 3), wall seconds and peak RSS from "
        "`os.wait4`; CPU s is user + system of the process (on a loaded machine, the better guide to what "
        "an idle one would take); start-up (imports) is included, so small sizes are dominated by it: the "
        "marginal µs per row between sizes is the growth that matters\n"
        "- growth exponent of the marginal cost over the last measured decades (1 = linear): "
        f"{', '.join(exps)}\n"
        f"- report synthesised where no run was measured, with {rows_per_part}-row parts (the median part of "
        "the largest real run)\n"
        f"- target: report at {TARGET_ROWS:,} rows ≤ {REPORT_TARGET_S:.0f} s and ≤ {REPORT_TARGET_MIB:.0f} "
        f"MiB → wall: {common.verdict(ok)}; CPU seconds: {common.verdict(cpu_ok)}\n\n"
        + common.table(["command", "rows", "wall s", "peak RSS MiB", "CPU s", "marginal µs/row", "how"], rows)
        + "\n"
    )
    return body + "".join("\n" + p for p in profiles)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="10³ and 10⁴ rows only")
    parser.add_argument("--max-freeze", type=int, default=100_000, help="largest freeze measured (rows)")
    parser.add_argument(
        "--max-run", type=int, default=100_000, help="largest fake-engine run measured (rows)"
    )
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile tables")
    args = parser.parse_args(argv)
    given = argv if argv is not None else sys.argv[1:]
    load = common.load_average()
    sizes = QUICK_SIZES if args.quick else SIZES
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-growth-") as tmp:
        root = Path(tmp)
        points = run_growth(sizes, args.max_freeze, args.max_run, root)
        run_dirs = sorted(
            root.glob("run-*/runs/*/manifest.json"), key=lambda p: int(p.parts[-4].split("-")[1])
        )
        rows_per_part = part_rows(run_dirs[-1].parent) if run_dirs else 1024
        profiles = []
        if not args.no_profile and not args.quick:
            profiles.append(profile_run(root))
            top = [p for p in points if p.op == "report"][-1]
            if top.wall_s > REPORT_TARGET_S or top.peak_rss_mib > REPORT_TARGET_MIB:
                synth = sorted(root.glob("synthetic-*/runs/*/manifest.json"))
                if synth:
                    profiles.append(profile_report(synth[-1].parent))
            profiles.append(report_by_part_size(root, top.rows, rows_per_part)[0])
    text = section(points, [common.PYTHON, __file__, *given], load, profiles, rows_per_part)
    print(text)
    common.write_section("growth", text, {"points": [asdict(p) for p in points]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
