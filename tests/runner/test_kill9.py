"""kill -9 at 20 random points, then resume: the same rows as an uninterrupted run, none lost or
duplicated, and a report identical byte for byte (timestamps and measured timings aside).

The uninterrupted run is the real command line in a subprocess. The killed runs are `kvgate run` in
processes forked from a forkserver that has kvgate imported, so each starts in milliseconds and 20 kills
fit in well under a minute on two cores; most land while a run generates and stores parts (a per-case
latency fault gives them time), some anywhere in start-up. The matrix has every kind of pass: the
control, its A/A replicate, a reuse arm in batches (its cache history replayed on resume), planted wrong
answers and engine errors, and confirm-reruns.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_support import DATA, KEY, Invoke, part_sizes, stored_rows, write_matrix

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from crash_launch import KVGATE, comparable_report, forked, stored_parts, wait_for_part

KILLS = 20
SEED = 20260601
CASES = 48
MATRIX = """
[matrix]
control = "full"
candidates = ["streaming-50", "fp8-e4m3", "prefix-reuse"]
aa_replicate = true
confirm_reruns = 1

[arm.prefix-reuse]
batch_size = 4

[faults."*"]
latency_s = 0.01

[faults.fp8-e4m3]
wrong_answer_rate = 0.2
error_rate = 0.05

[faults.prefix-reuse]
stale_reuse_rate = 0.1
latency_s = 0.02
"""


def _first_pass_rows(runs: Path, arm: str) -> int:
    found = [p for p in runs.glob("*") if (p / "manifest.json").exists()]
    return sum(r["arm"] == arm and r["attempt"] == 0 for r in stored_rows(found[0])) if found else 0


@pytest.mark.slow  # a driver process killed mid-run, resumed, and an uninterrupted run beside it
def test_kill9_then_resume_matches_uninterrupted(kvgate: Invoke, tmp_path: Path) -> None:
    workload = tmp_path / "kill.words.parquet"
    frozen = kvgate("freeze", DATA / "accept.toml", "-o", workload, "--limit", CASES)
    assert frozen.exit_code == 0, frozen.output
    matrix = write_matrix(tmp_path / "kill.toml", MATRIX)
    spec = ["run", "--engine", "fake", "-w", workload, "-m", matrix, "--quiet"]
    uninterrupted_cmd = [*KVGATE, *map(str, [*spec, "-o", tmp_path / "uninterrupted"])]
    reference = subprocess.Popen(
        uninterrupted_cmd, cwd=tmp_path, stdout=subprocess.DEVNULL
    )  # alongside: it sleeps

    rng = random.Random(SEED)
    runs = tmp_path / "killed"
    mid_generation, reuse_interrupted = 0, 0
    for kill in range(KILLS):
        before = stored_parts(runs)
        started = (runs / "run" / "manifest.json").exists()  # a run killed before its manifest: start it
        again = (
            ["run", "--resume", runs / "run", "--quiet"] if started else [*spec, "--run-dir", runs / "run"]
        )
        proc = forked(again, tmp_path)
        if kill % 4 == 3:  # now and then, anywhere in start-up: reading inputs, the manifest, the lock
            time.sleep(rng.uniform(0.0, 0.8))
        else:  # mostly while it generates and stores parts
            wait_for_part(proc, runs, before)
            time.sleep(rng.uniform(0.0, 0.4))
        alive = proc.is_alive()
        proc.kill()  # SIGKILL
        proc.join()
        assert proc.exitcode in (-signal.SIGKILL, 1), proc.exitcode
        mid_generation += alive and stored_parts(runs) > before
        reuse_interrupted += 0 < _first_pass_rows(runs, "prefix-reuse") < CASES
    (run_dir,) = [p for p in runs.glob("*") if (p / "manifest.json").exists()]
    assert mid_generation >= KILLS // 2, f"only {mid_generation} kills landed while it generated"
    assert reuse_interrupted >= 1, "no kill landed inside the reuse arm's pass"

    finished = kvgate("run", "--resume", run_dir, "--quiet")
    assert finished.exit_code == 1, finished.stderr  # fp8-e4m3's planted failures fail the gate
    assert reference.wait(timeout=120) == 1
    (uninterrupted,) = [p for p in (tmp_path / "uninterrupted").glob("*") if (p / "manifest.json").exists()]
    spec_hash = json.loads((run_dir / "manifest.json").read_text())["run_id"].split("-")[-1]
    assert uninterrupted.name.endswith(f"-{spec_hash}")  # the same spec hash, in a run of its own

    rows, expected = stored_rows(run_dir), stored_rows(uninterrupted)
    keys = [tuple(r[k] for k in KEY) for r in rows]
    assert len(keys) == len(set(keys)), "a row was stored twice"
    assert len(rows) > 5 * CASES  # every first pass, plus the confirm-reruns
    assert rows == expected
    assert not list(run_dir.glob("**/.*.tmp"))
    assert min(part_sizes(run_dir)) > 0  # replayed batches store no empty parts

    reports = [kvgate("report", r, "--format", "json") for r in (run_dir, uninterrupted)]
    assert [r.exit_code for r in reports] == [1, 1]
    texts = [comparable_report(r.stdout) for r in reports]
    assert texts[0].encode() == texts[1].encode()
