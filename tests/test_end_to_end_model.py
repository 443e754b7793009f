"""End to end on the real embedded model: freeze for its tokenizer, run the default matrix, report.

Four passkey cases of ~512 tokens (16 generations in all) keep this near half a minute on 2 cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvgate.cli import cli
from kvgate.rundir.store import read_results

pytestmark = pytest.mark.model


def test_default_matrix_on_the_embedded_model(tmp_path: Path, model_folder: Path) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(
        'name = "tiny"\n[[generate]]\ngenerator = "passkey"\n'
        "lengths = [512]\ndepths = [0.1, 0.4, 0.6, 0.95]\n"
    )
    workload = tmp_path / "tiny.parquet"
    frozen = CliRunner().invoke(cli, ["freeze", str(suite), "-o", str(workload), "--model", "smollm2-135m"])
    assert frozen.exit_code == 0, frozen.output

    runs = tmp_path / "runs"
    result = CliRunner().invoke(cli, ["run", "-w", str(workload), "-o", str(runs), "--json"])
    report = json.loads(result.stdout)
    # Four cases are too few for the default policy to pass anything: inconclusive or failed, never 0/2/4.
    assert result.exit_code in (1, 3), result.output
    assert report["exit_code"] == result.exit_code

    (run_dir,) = [p for p in runs.iterdir() if p.name != "workloads"]
    rows = read_results(run_dir).to_pylist()
    assert {r["arm"] for r in rows} == {"full", "streaming-50", "fp8-e4m3"}
    assert len(rows) == 4 * 4  # control, its A/A replicate, two candidates
    assert not any(r["fail_kind"] == "engine_error" for r in rows)
    control = {r["case_id"]: r for r in rows if r["arm"] == "full" and r["replicate"] == 0}
    assert sum(r["passed"] for r in control.values()) >= 3  # the model finds most passkeys

    # The report's numbers can be recomputed from the stored rows.
    streaming = {r["case_id"]: r for r in rows if r["arm"] == "streaming-50"}
    failures = sum(1 for c, r in control.items() if r["passed"] and not streaming[c]["passed"])
    (arm,) = [a for a in report["arms"] if a["arm"] == "streaming-50"]
    overall = arm["slices"][0]
    assert overall["slice"] == "all"
    assert overall["cache_induced_failures"] == failures
    assert overall["control_passes"] == sum(r["passed"] for r in control.values())
    # StreamingLLM keeps four sinks and the recent half: the needles at 10% and 40% depth lie in the
    # evicted middle.
    assert failures >= 1
    # Kept entries: half the prompt under eviction, all of it otherwise.
    for r in streaming.values():
        assert r["n_kv_entries_kept"] == r["n_prompt_tokens"] - round(0.5 * r["n_prompt_tokens"])
    assert all(r["n_cached_tokens"] == 0 for r in rows)
