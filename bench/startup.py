"""Start-up: `kvgate --help` (target ≤ 0.5 s) and `kvgate report` on a small run (target ≤ 1.5 s).

Each command runs `--repeat` times in a fresh process; the median wall counts, CPU seconds beside it
(the machine is shared). The small run: 24 synthetic cases under the default matrix's shape on the fake
engine (96 result rows), made once with `kvgate run`. `python -X importtime` shows which imports the
report's start-up goes to.

    .venv/bin/python bench/startup.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import common
from workloads import GROWTH_MATRIX, synthetic_workload

HELP_TARGET_S, REPORT_TARGET_S = 0.5, 1.5
SMALL_CASES = 24


def small_run(root: Path) -> Path:
    synthetic_workload(root / "workload.parquet", SMALL_CASES)
    (root / "matrix.toml").write_text(GROWTH_MATRIX, encoding="utf-8")
    argv = [common.KVGATE, "run", "-w", str(root / "workload.parquet"), "-m", str(root / "matrix.toml")]
    child = common.run_child([*argv, "--engine", "fake", "-o", str(root / "runs"), "--quiet"], 600)
    if child.returncode not in (0, 1, 3):
        raise RuntimeError(f"kvgate run failed ({child.returncode}): {common.last_line(child.stderr)}")
    (manifest,) = (root / "runs").glob("*/manifest.json")
    return manifest.parent


def timed(argv: list[str], repeat: int) -> tuple[list[float], list[float]]:
    """(walls, CPU seconds) of `repeat` fresh processes of `argv`, after one untimed warm-up (page cache)."""
    common.run_child(argv, 120)
    children = [common.run_child(argv, 120) for _ in range(repeat)]
    bad = [c for c in children if c.returncode not in (0, 1, 3)]
    if bad:
        raise RuntimeError(
            f"{common.command_line(argv)} exited {bad[0].returncode}: {common.last_line(bad[0].stderr)}"
        )
    return [c.wall_s for c in children], [c.cpu_s for c in children]


def import_profile(argv: list[str], top: int = 10) -> str:
    """Where `argv`'s imports go (`python -X importtime`; argv[0] a Python console script): self time
    summed per top-level package, and the module that first pulled each package in."""
    child = common.run_child([common.PYTHON, "-X", "importtime", *argv], 120)
    return import_table(child.stderr, top)


def import_table(importtime_stderr: str, top: int = 10) -> str:
    """The table of `import_profile` from the stderr of a `python -X importtime` process."""
    entries = []  # (depth, module, self µs), in the post-order importtime prints
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            own_us, _, name = line.split(":", 1)[1].split("|")
            if own_us.strip().isdigit():
                entries.append(((len(name) - len(name.lstrip()) - 1) // 2, name.strip(), int(own_us)))
    total: dict[str, int] = {}
    pulled_by: dict[str, str] = {}
    for i, (_, module, own) in enumerate(entries):
        package = module.split(".")[0]
        total[package] = total.get(package, 0) + own
        if package not in pulled_by:
            pulled_by[package] = _importer(entries, i, package)
    rows = sorted(total.items(), key=lambda kv: kv[1], reverse=True)[:top]
    all_ms = sum(total.values()) / 1000
    return f"imports take {all_ms:.0f} ms in all:\n\n" + common.table(
        ["package", "import ms (own, summed)", "first imported by"],
        [[f"`{p}`", f"{us / 1000:.0f}", f"`{pulled_by[p]}`"] for p, us in rows],
    )


def _importer(entries: list[tuple[int, str, int]], index: int, package: str) -> str:
    """The nearest enclosing import of entries[index] from another package (kvgate's modules preferred)."""
    depth = entries[index][0]
    outer = "(a function at run time, not an import statement)"
    for d, module, _ in entries[index + 1 :]:
        if d < depth:
            depth = d
            if module.split(".")[0] != package:
                if module.startswith("kvgate"):
                    return module
                outer = module if outer.startswith("(") else outer
    return outer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="3 repetitions instead of 9")
    parser.add_argument("--repeat", type=int, default=None)
    args = parser.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 9)
    load = common.load_average()
    commands = {"help": [common.KVGATE, "--help"]}
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-startup-") as tmp:
        run_dir = small_run(Path(tmp))
        commands["report"] = [common.KVGATE, "report", str(run_dir), "-o", os.devnull]
        results = {name: timed(cmd, repeat) for name, cmd in commands.items()}
        targets = {"help": HELP_TARGET_S, "report": REPORT_TARGET_S}
        profiles = {"report": import_profile(commands["report"])}  # near its target: always shown
    rows = []
    for name, cmd in commands.items():
        walls, cpus = results[name]
        wall = common.median(walls)
        cpu = common.median(cpus)
        rows.append([
            f"`{common.command_line(cmd).replace(str(run_dir), 'RUN')}`", f"{wall:.2f}", f"{cpu:.2f}",
            f"≤ {targets[name]}", common.verdict(wall <= targets[name]), common.verdict(cpu <= targets[name]),
            ", ".join(f"{w:.2f}" for w in walls),
        ])  # fmt: skip
    text = (
        "## Start-up\n\n"
        + common.provenance([common.PYTHON, __file__, *(argv if argv is not None else sys.argv[1:])], load)
        + f"- median of {repeat} fresh processes after one warm-up; RUN is a fake-engine run of "
        f"{SMALL_CASES} cases × 4 arms ({SMALL_CASES * 4} result rows), reported as a table to a file\n\n"
        + common.table(
            ["command", "wall s (median)", "CPU s (median)", "target s", "wall", "CPU", "each wall s"], rows
        )
        + "\n"
    )
    for name, table in profiles.items():
        text += f"\nWhere `kvgate {name}`'s start-up goes (`python -X importtime`): {table}\n"
    print(text)
    common.write_section("startup", text, {n: {"wall_s": r[0], "cpu_s": r[1]} for n, r in results.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
