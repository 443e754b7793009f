"""A trace of 20 requests behind one short system prompt, run on the fake engine: under the default
`prefix_min_share` the report counts 20 clusters (design effect 1, effective n 20); declared
`prefix_min_share = 0` they are one cluster, worth one case."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import kvgate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from workloads import shared_prompt_trace


def _all_slice(tmp_path: Path, keys: str) -> dict[str, Any]:
    workload = shared_prompt_trace(tmp_path, keys)
    matrix = tmp_path / "m.toml"
    matrix.write_text('[matrix]\ncontrol = "full"\ncandidates = ["prefix-reuse"]\n')
    runs = tmp_path / "runs"
    run = kvgate("run", "--engine", "fake", "-w", workload, "-m", matrix, "-o", runs, "--quiet")
    assert run.exit_code == 3, run.output  # 20 clean cases cannot pass at τ = 5% (a PASS needs 59)
    (manifest,) = runs.glob("*/manifest.json")
    report = json.loads(kvgate("report", manifest.parent, "--format", "json").stdout)
    everything: dict[str, Any] = report["arms"][0]["slices"][0]
    assert (everything["slice"], everything["control_passes"]) == ("all", 20)
    return everything


@pytest.mark.parametrize(
    ("keys", "clusters", "needs"),
    [("", 20, "a PASS needs ≈59 control passes"), ("prefix_min_share = 0\n", 1, "≈59 distinct clusters")],
)
def test_the_report_counts_each_request_behind_a_short_system_prompt(
    tmp_path: Path, keys: str, clusters: int, needs: str
) -> None:
    everything = _all_slice(tmp_path, keys)
    assert everything["clusters"] == clusters
    assert everything["design_effect"] == pytest.approx(20 / clusters)
    assert everything["n_eff"] == pytest.approx(clusters)
    assert needs in everything["reason"]
