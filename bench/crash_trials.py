"""Crash trials: a fake-engine run interrupted every way a machine interrupts one, then resumed; each
trial checks that no row is lost or stored twice and that the report equals an uninterrupted run's
(timestamps, run ids and measured timings aside).

Trials: kill -9 after a part was written (and at random points of start-up), SIGINT, SIGTERM, two
writers on one run directory, and a full disk at several sizes (a tmpfs the run lives on, grown back
with `mount -o remount` before the resume; needs root, else those trials are skipped and said so).
Every command is the real `kvgate` command line in a child process.

    python bench/crash_trials.py [--kills 8] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from crash_launch import KVGATE, TIMINGS, comparable_report, start, stored_parts, wait_for_part

from kvgate.rundir.store import part_paths

KEY = ("arm", "replicate", "case_id", "attempt")
MATRIX = """
[matrix]
control = "full"
candidates = ["streaming-50", "fp8-e4m3", "prefix-reuse"]
aa_replicate = true
confirm_reruns = 1

[arm.prefix-reuse]
batch_size = 4

[faults."*"]
latency_s = 0.03

[faults.fp8-e4m3]
wrong_answer_rate = 0.2
error_rate = 0.05

[faults.prefix-reuse]
stale_reuse_rate = 0.1
"""
DISK_SIZES = ["8k", "24k", "48k", "72k", "96k", "128k"]
"""tmpfs sizes: the whole run takes ≈ 150 KiB, so each fills up at another point."""


def kvgate(*args: object, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KVGATE, *map(str, args)], capture_output=True, text=True, **kw)


def rows(run: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for part in part_paths(run):
        found += pq.read_table(part).to_pylist()
    for row in found:
        for column in TIMINGS:
            row.pop(column, None)
    return sorted(found, key=lambda r: tuple(r[k] for k in KEY))


def report_text(run: Path) -> str:
    return comparable_report(kvgate("report", run, "--format", "json").stdout)


class Trials:
    def __init__(self, root: Path, spec: list[object]) -> None:
        self.root, self.spec = root, spec
        reference = root / "reference"
        self.reference_code = kvgate(*spec, "--run-dir", reference).returncode
        self.reference_rows = rows(reference)
        self.reference_report = report_text(reference)
        self.results: list[dict[str, Any]] = []

    def finish(self, name: str, run: Path, interrupted: list[Any], **extra: Any) -> None:
        """Resume `run` to its end and compare it with the uninterrupted run."""
        resumed = kvgate("run", "--resume", run, "--quiet")
        got = rows(run)
        keys = [tuple(r[k] for k in KEY) for r in got]
        expected = {tuple(r[k] for k in KEY) for r in self.reference_rows}
        result = {
            "trial": name,
            "interruptions": interrupted,
            "resume exit": resumed.returncode,
            "rows": len(got),
            "lost": len(expected - set(keys)),
            "duplicated": len(keys) - len(set(keys)),
            "rows equal": got == self.reference_rows,
            "report equal": report_text(run) == self.reference_report,
            "exit equal": resumed.returncode == self.reference_code,
            "traceback": "Traceback" in resumed.stderr,
            **extra,
        }
        self.results.append(result)
        print(json.dumps(result), flush=True)

    def kill9(self, kills: int, seed: int) -> None:
        rng = random.Random(seed)
        run = self.root / "kill9" / "run"
        landed = []
        for k in range(kills):
            started = (run / "manifest.json").exists()
            argv = ["run", "--resume", run, "--quiet"] if started else [*self.spec, "--run-dir", run]
            before = stored_parts(run) if started else 0
            proc = start(argv)
            if k % 3 == 2:  # anywhere: start-up, the manifest, the lock
                time.sleep(rng.uniform(0.0, 1.5))
                where = "random"
            else:  # after a part was written
                wait_for_part(proc, run, before, timeout=60)
                time.sleep(rng.uniform(0.0, 0.3))
                where = "after a part"
            alive = proc.poll() is None
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            landed.append({"where": where, "alive": alive, "parts": stored_parts(run) if run.exists() else 0})
        after_part = sum(1 for x in landed if x["where"] == "after a part" and x["alive"])
        self.finish("kill -9", run, landed, **{"kills after a part": after_part})

    def signal_trial(self, sig: signal.Signals) -> None:
        run = self.root / sig.name / "run"
        proc = start([*self.spec, "--run-dir", run])
        wait_for_part(proc, run, 0, timeout=60)
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
        stderr = proc.stderr.read() if proc.stderr else ""
        self.finish(
            sig.name, run, [{"exit": code, "traceback": "Traceback" in stderr, "last": stderr.strip()[-160:]}]
        )

    def two_writers(self) -> None:
        run = self.root / "writers" / "run"
        first = start([*self.spec, "--run-dir", run])
        wait_for_part(first, run, 0, timeout=60)
        second = kvgate("run", "--resume", run, "--quiet", timeout=60)
        third = kvgate(*self.spec, "--run-dir", run, timeout=60)
        first_code = first.wait(timeout=120)
        seen = [
            {"second (resume) exit": second.returncode, "its line": second.stderr.strip()[-160:]},
            {"third (--run-dir) exit": third.returncode, "its line": third.stderr.strip()[-160:]},
            {"first exit": first_code},
        ]
        self.finish("two writers", run, seen)

    def disk_full(self, size: str) -> None:
        mount = self.root / f"disk-{size}"
        mount.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)]).returncode:
            self.results.append({"trial": f"disk full {size}", "skipped": "tmpfs cannot be mounted here"})
            return
        try:
            run = mount / "run"
            full = kvgate(*self.spec, "--run-dir", run, timeout=120)
            seen = {
                "exit": full.returncode,
                "traceback": "Traceback" in full.stderr,
                "last": full.stderr.strip()[-160:],
                "parts": stored_parts(run) if run.exists() else 0,
            }
            subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)
            if not (run / "manifest.json").exists():
                shutil.rmtree(run, ignore_errors=True)
                started = kvgate(*self.spec, "--run-dir", run)
                seen["restarted (no manifest was written)"] = started.returncode
            self.finish(f"disk full {size}", run, [seen])
        finally:
            subprocess.run(["umount", "-l", str(mount)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=12)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    os.nice(10)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job ignores SIGINT,
    # and an ignored signal stays ignored in every child: the SIGINT trial would test nothing
    root = Path(tempfile.mkdtemp(prefix="crash-trials-"))
    workload = root / "w.parquet"
    kvgate("freeze", "smoke", "-o", workload, check=True)
    (root / "m.toml").write_text(MATRIX)
    spec: list[object] = ["run", "--engine", "fake", "-w", workload, "-m", root / "m.toml", "--quiet"]
    trials = Trials(root, spec)
    print(f"reference: exit {trials.reference_code}, {len(trials.reference_rows)} rows", flush=True)
    trials.kill9(args.kills, args.seed)
    trials.signal_trial(signal.SIGINT)
    trials.signal_trial(signal.SIGTERM)
    trials.two_writers()
    for size in DISK_SIZES:
        trials.disk_full(size)
    bad = [
        r
        for r in trials.results
        if r.get("lost")
        or r.get("duplicated")
        or r.get("rows equal") is False
        or r.get("report equal") is False
        or r.get("traceback")
    ]
    print(f"{len(trials.results)} trials; {len(bad)} with rows lost, duplicated or a report that differs")
    if args.json:
        args.json.write_text(
            json.dumps({"reference_rows": len(trials.reference_rows), "trials": trials.results}, indent=1)
        )
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
