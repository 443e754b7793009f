"""When clusters bind, an inconclusive arm says how many distinct clusters a PASS needs, not how many more
control passes: the shipped `reuse` suite (16 prefix groups of 4) on the fake engine, no failure at all,
so nothing bounds the ICC and each group counts once."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.cli import kvgate

from kvgate.workload.freeze import freeze
from kvgate.workload.tokenizer import WordTokenizer


def test_a_clean_reuse_arm_needs_distinct_clusters(tmp_path: Path) -> None:
    workload = tmp_path / "reuse.parquet"
    freeze(["reuse"], workload, WordTokenizer(), seed=0)
    matrix = tmp_path / "m.toml"
    matrix.write_text('[matrix]\ncontrol = "full"\ncandidates = ["prefix-reuse"]\n')
    run = kvgate("run", "--engine", "fake", "-w", workload, "-m", matrix, "-o", tmp_path / "runs", "--quiet")
    assert run.exit_code == 3, run.output
    (run_dir,) = (tmp_path / "runs").glob("*/manifest.json")
    table = kvgate("report", run_dir.parent).stdout
    assert "needs: all (0/64): a PASS needs ≈59 distinct clusters at this CFR (has 16)" in table
    data = json.loads(kvgate("report", run_dir.parent, "--format", "json").stdout)
    everything = data["arms"][0]["slices"][0]
    assert (everything["clusters"], everything["icc_upper"], everything["design_effect"]) == (16, 1.0, 4.0)
    assert everything["n_eff"] == 16.0
