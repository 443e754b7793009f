"""Shared by the benchmarks: the machine, timing a child process (wall and peak RSS), sides measured in
alternated repetitions, and RESULTS.md.

Every benchmark writes its section to `bench/results/<name>.json` ({"markdown", "data"}) and then
re-renders `bench/RESULTS.md` from every section there, so a benchmark run alone (`--quick` or not)
updates its own section and keeps the others. Figures measured by hand (long runs on the embedded
model, with their commands) live beside them as `bench/results/<name>.md` and are kept the same way.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
RESULTS_MD = BENCH_DIR / "RESULTS.md"
PYTHON = sys.executable
KVGATE = str(Path(sys.executable).with_name("kvgate"))
SECTION_ORDER = (
    "harness_hf",
    "harness_vllm",
    "growth",
    "startup",
    "first_generation",
    "freeze_4k",
    "report_1m",
)
MIB = 1024 * 1024
T = TypeVar("T")
R = TypeVar("R")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def load_average() -> str:
    """The 1, 5 and 15-minute load averages, e.g. "3.10 2.75 2.01" (other work on the machine)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1024 * 1024)
    except OSError:
        pass
    return float("nan")


def machine() -> str:
    """One line: CPU, cores usable, memory, OS and Python."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{cpu_model()}, {cores} cores, {memory_gib():.0f} GiB RAM, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def rotated(names: Sequence[T], rep: int) -> list[T]:
    """`names` rotated left by `rep`: repetition `rep`'s order when sides alternate, so that each side runs
    first in turn and none always runs after the same neighbour (a warm or a cold cache)."""
    k = rep % len(names)
    return [*names[k:], *names[:k]]


def alternated(names: Sequence[str], reps: int, measure: Callable[[str, int], R]) -> dict[str, list[R]]:
    """`measure(name, rep)` for every name in each of `reps` repetitions, the names in `rotated` order:
    name → its `reps` results, in repetition order (side by side, so that a change of load between
    repetitions falls on every side alike)."""
    out: dict[str, list[R]] = {name: [] for name in names}
    for rep in range(reps):
        for name in rotated(names, rep):
            out[name].append(measure(name, rep))
    return out


def command_line(argv: Sequence[str]) -> str:
    """`argv` as a shell line, paths under the repository written relative to it."""
    root = str(REPO_ROOT) + os.sep
    words = [os.path.normpath(str(a)) if os.path.isabs(str(a)) else str(a) for a in argv]
    return " ".join(shlex.quote(w.replace(root, "")) for w in words)


@dataclass(frozen=True)
class ChildRun:
    """One child process: its exit code, wall seconds, peak resident memory and output."""

    returncode: int
    wall_s: float
    peak_rss_mib: float
    cpu_s: float
    stdout: str
    stderr: str
    timed_out: bool = False


def run_child(
    argv: Sequence[str],
    timeout_s: float | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> ChildRun:
    """Run `argv` and measure it alone: wall time, and peak RSS and CPU time from `os.wait4`.

    wait4 gives this child's own rusage (RUSAGE_CHILDREN would give the largest child ever waited for).
    Output goes to temp files, so a chatty child cannot block on a full pipe.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(argv), stdout=out, stderr=err, cwd=cwd, env={**os.environ, **(env or {})}
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout_s, kill) if timeout_s else None
        if timer:
            timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            if timer:
                timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return ChildRun(
            returncode=proc.returncode,
            wall_s=wall,
            peak_rss_mib=usage.ru_maxrss / 1024,
            cpu_s=usage.ru_utime + usage.ru_stime,
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
            timed_out=killed.is_set(),
        )


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**met**" if ok else "**missed**")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_section(name: str, markdown: str, data: dict[str, Any]) -> Path:
    """Store a benchmark's section and re-render RESULTS.md; returns the section's JSON path."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    text = json.dumps({"markdown": markdown.strip() + "\n", "data": data}, indent=2, sort_keys=True)
    path.write_text(text + "\n", encoding="utf-8")
    render_results()
    return path


def render_results() -> str:
    """RESULTS.md from every stored section (a benchmark's `.json`, a hand-measured `.md`), in
    SECTION_ORDER, then any others by name."""
    sections = {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS_DIR.glob("*.json"))}
    for p in sorted(RESULTS_DIR.glob("*.md")):
        if p.stem in sections:
            raise SystemExit(f"bench/results has both {p.stem}.json and {p.stem}.md: keep one")
        sections[p.stem] = {"markdown": p.read_text(encoding="utf-8").strip() + "\n"}
    order = [n for n in SECTION_ORDER if n in sections] + sorted(set(sections) - set(SECTION_ORDER))
    head = (
        "# kvgate benchmarks\n\n"
        "Written by the scripts in `bench/` (`make bench` runs them all through `bench/run_all.py`; each "
        "also runs alone, with `--quick` for a short version). Each section names its machine, date, load "
        "average (the machine is shared, so absolute times are noisy: ratios are measured side by side, "
        "alternating repetitions) and the command that produced it.\n"
    )
    text = head + "".join("\n" + sections[n]["markdown"] for n in order)
    RESULTS_MD.write_text(text, encoding="utf-8")
    return text


def provenance(argv: Sequence[str], load_before: str) -> str:
    """The lines every section starts with: machine, date, load before and after, and the command."""
    return (
        f"- machine: {machine()}\n"
        f"- date: {now()}; load average (1/5/15 min) before: {load_before}, after: {load_average()}\n"
        f"- command: `{command_line(argv)}`\n"
    )


def profile_call_table(call: Any, top: int = 12) -> tuple[float, str, dict[Any, Any]]:
    """Run `call()` under cProfile; returns (wall seconds, a Markdown table of the `top` functions by own
    time, the raw pstats entries keyed by (file, line, function)).

    Rows are file:function with own time (tottime), time including callees (cumtime) and calls.
    """
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.runcall(call)
    wall = time.perf_counter() - start
    stats: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    entries = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)
    rows = []
    for (filename, line, func), (_, ncalls, tottime, cumtime, _) in entries[:top]:
        where = filename.replace(str(REPO_ROOT) + os.sep, "")
        where = where.split("site-packages" + os.sep)[-1] if "site-packages" in where else where
        rows.append([f"`{where}:{line}({func})`", f"{tottime:.2f}", f"{cumtime:.2f}", ncalls])
    return wall, table(["function", "own s", "with callees s", "calls"], rows), stats
