"""Acceptance: a planted 10% wrong-answer fault in one arm fails the gate naming that arm and its slices;
the clean arms pass; the A/A replicate shows no flips."""

from __future__ import annotations

import json
from pathlib import Path

from runner_support import Invoke, only_run, stored_rows, write_matrix

MATRIX = """
[matrix]
control = "full"
candidates = ["streaming-50", "fp8-e4m3", "offload-host"]
aa_replicate = true

[faults.fp8-e4m3]
wrong_answer_rate = 0.1

[arm.offload-host]
kv_blocks = 2  # blocks must leave the pool for the offload tier to be read back (its proof)
"""


def test_planted_wrong_answers_fail_that_arm_only(
    kvgate: Invoke, accept_workload: Path, tmp_path: Path
) -> None:
    matrix = write_matrix(tmp_path / "planted.toml", MATRIX)
    result = kvgate(
        "run", "--engine", "fake", "-w", accept_workload, "-m", matrix, "-o", tmp_path / "runs", "--json"
    )
    assert result.exit_code == 1, result.stderr
    report = json.loads(result.stdout)
    arms = {a["arm"]: a for a in report["arms"]}
    assert arms["fp8-e4m3"]["decision"] == "fail"
    failed = [s["slice"] for s in arms["fp8-e4m3"]["slices"] if s["decision"] == "fail"]
    assert "all" in failed and len(failed) >= 3
    overall = arms["fp8-e4m3"]["slices"][0]
    assert overall["control_passes"] == 320
    assert 0.05 < overall["cfr"] < 0.15
    assert arms["streaming-50"]["decision"] == "pass"
    assert arms["offload-host"]["decision"] == "pass"
    assert report["noise_floor"]["flips"] == 0
    assert report["noise_floor"]["n_pairs"] == 320

    # Running it again is a new run that measures again (a nightly job), with the same spec hash.
    first = only_run(tmp_path / "runs")
    table = kvgate("run", "--engine", "fake", "-w", accept_workload, "-m", matrix, "-o", tmp_path / "runs")
    assert table.exit_code == 1
    verdict = next(line for line in table.stdout.splitlines() if line.startswith("fp8-e4m3: FAIL"))
    assert "slice all" in verdict
    assert "streaming-50: PASS" in table.stdout and "offload-host: PASS" in table.stdout
    runs = sorted(p for p in (tmp_path / "runs").iterdir() if (p / "manifest.json").exists())
    assert len(runs) == 2 and runs[0] == first  # run ids sort by time
    assert runs[0].name.split("-")[-1] == runs[1].name.split("-")[-1]
    assert stored_rows(runs[0]) == stored_rows(runs[1])
    assert len(stored_rows(runs[1])) == 5 * 320
