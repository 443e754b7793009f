"""Start-up of the hf engine: CPU seconds from a fresh `kvgate run --engine hf` to its first generation
(target ≤ 7 s), and which imports it pays for.

Each repetition is a fresh process running the real command line (`kvgate run --engine hf -w W
--limit 1`, the control and one StreamingLLM arm) with one change: the hf session's `generate` ends the
process (`os._exit`) as soon as its first call returns, so the process's CPU seconds (user + system, from
`os.wait4`) are the time to the first generation: interpreter, imports, workload check, model load and
one smoke case's prefill and decode. The child also notes its own CPU seconds (`time.process_time`, all
its threads) where the run asks for its engine and where the engine is made, splitting the figure into
three phases: before the engine (interpreter, kvgate's CLI, the workload's check, the run folder), the
engine (importing torch and transformers, loading the model, packing its weights) and the first
generation itself. With `--against TREE` (a checkout of another kvgate commit) every
repetition also runs that tree, the two alternating and the order rotating (the machine is shared: the
figure is the median of the per-repetition ratios). `python -X importtime` on the same command names the
packages imported and who pulled them in; sympy and triton must not be among them.

    .venv/bin/python bench/first_generation.py [--quick] [--repeat N] [--against TREE]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common
from startup import import_table

TARGET_CPU_S = 7.0
UNUSED = ("sympy", "triton")
"""Packages no kvgate process should import (the hf engine never compiles or shards)."""
MATRIX = """\
[matrix]
control = "full"
candidates = ["streaming-50"]
aa_replicate = false
"""


def child(mark: str, argv: list[str]) -> None:
    """The child: `kvgate run ARGV`, ended by the first hf generation, which it notes in the file `mark`
    (the run sends the engine's stdout and stderr to its engine.log). The hf session is patched once
    the run has created its engine, so the engine module is imported where a run imports it."""
    from kvgate.cli import cli
    from kvgate.executors.local import LocalExecutor

    create_engine = LocalExecutor.create_engine

    marks: list[float] = []  # process CPU seconds where the engine is asked for, and made

    def first(self: Any, cases: Any) -> Any:
        out = generate(self, cases)
        done = time.process_time()
        loaded = [p for p in UNUSED if sys.modules.get(p) is not None]  # None: marked absent, not imported
        phases = (marks[0], marks[1] - marks[0], done - marks[1])
        note = f"{len(out)} case(s), error {out[0].error}\nloaded: {' '.join(loaded)}\n"
        note += "phases: " + " ".join(f"{p:.4f}" for p in phases)
        Path(mark).write_text(note, encoding="utf-8")
        os._exit(0)

    def created(self: LocalExecutor, *args: Any) -> Any:
        nonlocal generate
        marks.append(time.process_time())
        engine = create_engine(self, *args)
        marks.append(time.process_time())
        session = sys.modules["kvgate.engines.hf.engine"].HFSession
        generate, session.generate = session.generate, first
        return engine

    generate = None
    LocalExecutor.create_engine = created  # type: ignore[method-assign]
    cli.main(["run", *argv], prog_name="kvgate")


def command(tree: Path, workload: Path, matrix: Path, runs: Path) -> tuple[list[str], dict[str, str]]:
    """The child's argv and environment for kvgate at `tree`, with that tree's own model cache (the
    conversion a tree made is part of what its start-up loads) and Python's bytecode cache on, as by
    default (PYTHONDONTWRITEBYTECODE emptied: a checkout's modules are compiled once, by the warm-up, as
    an installed package's are at install, not at every start)."""
    mark = runs.with_suffix(".first")
    argv = [common.PYTHON, str(Path(__file__).resolve()), "--child", str(mark), "--engine", "hf"]
    argv += ["-w", str(workload), "-m", str(matrix), "--limit", "1", "-o", str(runs), "--quiet"]
    env = {"PYTHONPATH": str(tree), "KVGATE_CACHE": str(tree / ".cache" / "kvgate")}
    return argv, {**env, "PYTHONDONTWRITEBYTECODE": ""}


PHASES = ("before the engine", "the engine", "the first generation")
"""The child's phases (its CPU seconds split where the run asks for its engine and where it is made)."""


def first_generation(argv: list[str], env: dict[str, str], name: str) -> tuple[common.ChildRun, list[float]]:
    """One child, checked to have ended at its first generation, without error, and its phases' CPU s."""
    run = common.run_child(argv, 600, env=env)
    mark = Path(argv[argv.index("--child") + 1])
    noted = mark.read_text(encoding="utf-8").split("\n") if mark.exists() else ["no generation"]
    if run.returncode != 0 or noted[0] != "1 case(s), error None":
        raise SystemExit(f"{name}: exit {run.returncode}, {noted[0]}: {common.last_line(run.stderr)}")
    return run, [float(p) for p in noted[2].removeprefix("phases:").split()]


def measure(sides: dict[str, Path], workload: Path, matrix: Path, tmp: Path, repeat: int) -> dict:
    def run(name: str, rep: int) -> tuple[common.ChildRun, list[float]]:
        argv, env = command(sides[name], workload, matrix, tmp / f"runs-{name}-{rep}")
        return first_generation(argv, env, name)

    runs = common.alternated(list(sides), repeat + 1, run)  # the first is a warm-up (page cache)
    return {
        "cpu_s": {name: [r.cpu_s for r, _ in done[1:]] for name, done in runs.items()},
        "wall_s": {name: [r.wall_s for r, _ in done[1:]] for name, done in runs.items()},
        "peak_rss_mib": {name: [r.peak_rss_mib for r, _ in done[1:]] for name, done in runs.items()},
        "phase_cpu_s": {name: [phases for _, phases in done[1:]] for name, done in runs.items()},
    }


def imports(tree: Path, workload: Path, matrix: Path, tmp: Path) -> tuple[list[str], str]:
    """(the UNUSED packages loaded at the first generation, the import-time table) of one child of `tree`
    under `python -X importtime` (with --verbose, so the engine's stderr is not moved into the run's
    engine.log). A module marked absent (`sys.modules[name] = None`) shows in importtime's log without
    being loaded, so the child's own sys.modules decides (it notes them beside its first generation)."""
    argv, env = command(tree, workload, matrix, tmp / f"runs-importtime-{tree.name}")
    run, _ = first_generation([common.PYTHON, "-X", "importtime", *argv[1:], "--verbose"], env, str(tree))
    noted = Path(argv[argv.index("--child") + 1]).read_text(encoding="utf-8").split("\n")
    loaded = set(noted[1].removeprefix("loaded:").split())
    return [p for p in UNUSED if p in loaded], import_table(run.stderr, top=12)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child(argv[1], argv[2:])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="3 repetitions")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--against", type=Path, default=None, help="another kvgate tree, run alternately")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 7)
    here = Path(__file__).resolve().parent.parent
    sides = {"this tree": here}
    if args.against is not None:
        sides["before"] = args.against.resolve()
    load = common.load_average()
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-first-") as name:
        tmp = Path(name)
        from workloads import freeze_for_model

        workload = freeze_for_model(here / "suites" / "smoke.toml", tmp / "smoke.parquet")
        matrix = tmp / "matrix.toml"
        matrix.write_text(MATRIX, encoding="utf-8")
        result = measure(sides, workload, matrix, tmp, repeat)
        found, table = imports(here, workload, matrix, tmp)
        before_found = imports(sides["before"], workload, matrix, tmp)[0] if "before" in sides else None
    text = section(result, found, before_found, table, args, load, repeat)
    print(text)
    if not args.no_write:
        common.write_section("first_generation", text, {**result, "unused_imported": found})
    return 0


def section(
    result: dict,
    found: list[str],
    before_found: list[str] | None,
    table: str,
    args: argparse.Namespace,
    load: str,
    repeat: int,
) -> str:
    cpu, wall = result["cpu_s"], result["wall_s"]
    mine = common.median(cpu["this tree"])
    rows = [
        [name, f"{common.median(cpu[name]):.2f}", f"{common.median(wall[name]):.2f}",
         f"{common.median(result['peak_rss_mib'][name]):.0f}",
         ", ".join(f"{c:.2f}" for c in cpu[name])]
        for name in cpu
    ]  # fmt: skip
    text = (
        "## Start-up of the hf engine: time to the first generation\n\n"
        + common.provenance([common.PYTHON, __file__, *sys.argv[1:]], load)
        + "- each repetition a fresh `kvgate run --engine hf -w smoke.parquet --limit 1` (control and "
        "streaming-50, smoke frozen for smollm2-135m), ended by its first generation; CPU s = user + "
        f"system of the process; {repeat} repetitions after one warm-up, the sides alternating\n"
        f"- target: ≤ {TARGET_CPU_S:g} CPU s → {common.verdict(mine <= TARGET_CPU_S)} (median {mine:.2f})\n"
        f"- sympy or triton imported: this tree {', '.join(found) or 'neither'}"
        + (f"; before {', '.join(before_found) or 'neither'}" if before_found is not None else "")
        + "\n"
    )
    if "before" in cpu:
        ratio = common.median([a / b for a, b in zip(cpu["this tree"], cpu["before"], strict=True)])
        text += (
            f"- this tree ÷ before ({args.against}), median of per-repetition CPU ratios: **{ratio:.3f}×**\n"
        )
    text += "\n" + common.table(
        ["side", "CPU s (median)", "wall s (median)", "peak RSS MiB (median)", "each CPU s"], rows
    )
    split = result["phase_cpu_s"]
    phases = [
        [name, *(f"{common.median([p[k] for p in split[name]]):.2f}" for k in range(len(PHASES)))]
        for name in cpu
    ]
    text += (
        "\n\nWhere each side's CPU seconds go (medians; the child's own `time.process_time` where the run "
        "asks for its engine and where the engine is made):\n\n"
        + common.table(["side", *(f"{p} CPU s" for p in PHASES)], phases)
    )
    return text + "\n\nWhere the start-up's imports go (`python -X importtime`, this tree): " + table + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
