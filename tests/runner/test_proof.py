"""Proof of treatment (analysis.proof): on the fake engine every kind leaves its evidence in the stored
counters, and a planted no-op (`ignore_treatment`), or an offload tier never read back, is an error in
`kvgate run` and `kvgate report` alike, never a PASS."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from runner_support import Invoke, only_run, write_matrix

from kvgate.rundir.result_part import PROOF_COLUMNS, RESULT_SCHEMA_V3, RESULT_VERSION_KEY
from kvgate.rundir.store import read_results
from kvgate.workload.freeze import freeze
from kvgate.workload.tokenizer import WordTokenizer

ARMS = ["streaming-50", "fp8-e4m3", "offload-host", "prefix-reuse", "span-reuse"]
MATRIX = f"""
[matrix]
control = "full"
candidates = {json.dumps(ARMS)}
aa_replicate = false

[arm.offload-host]
kv_blocks = 4
"""


@pytest.fixture(scope="module")
def reuse_workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reuse suite (cases that share contexts) frozen with the word tokenizer."""
    path = tmp_path_factory.mktemp("reuse") / "reuse.words.parquet"
    freeze(["reuse"], path, WordTokenizer(), seed=0)
    return path


def run(kvgate: Invoke, workload: Path, matrix: Path, runs: Path) -> tuple[int, dict, str]:
    result = kvgate("run", "--engine", "fake", "-w", workload, "-m", matrix, "-o", runs, "--json")
    return result.exit_code, json.loads(result.stdout), result.stderr


def test_every_kind_shows_its_proof(kvgate: Invoke, reuse_workload: Path, tmp_path: Path) -> None:
    code, report, stderr = run(kvgate, reuse_workload, write_matrix(tmp_path / "m.toml", MATRIX), tmp_path)
    assert code == 3, stderr  # 64 cases are too few for a PASS, and nothing is an error
    arms = {a["arm"]: a for a in report["arms"]}
    assert {a: arms[a]["proof"]["status"] for a in ARMS} == dict.fromkeys(ARMS, "shown")
    assert "kvgate: error: proof" not in stderr
    evicted = arms["streaming-50"]["proof"]
    assert evicted["eviction_over_bound"] == 0 and evicted["kv_kept_share"] == pytest.approx(0.5, abs=0.01)
    fp8 = arms["fp8-e4m3"]["proof"]
    assert fp8["kv_dtypes"] == ["fp8_e4m3"] and fp8["kv_quantized"] > 0
    assert fp8["kv_bytes_per_entry"] == fp8["control_kv_bytes_per_entry"] / 2
    assert arms["fp8-e4m3"]["gains"]["kv_bytes"] == {
        "share": 0.5, "source": "engine", "bits": None, "control_bits": None
    }  # fmt: skip
    offload = arms["offload-host"]["proof"]
    assert offload["tier_blocks_written"] > offload["tier_blocks_read"] > 0  # only blocks beyond the pool
    assert arms["prefix-reuse"]["proof"]["cache_hit_cases"] > 0
    assert arms["span-reuse"]["proof"]["spans_reused"] > 0


@pytest.mark.parametrize(
    ("arm", "evidence"),
    [
        ("streaming-50", "kept more KV entries than ratio 0.5 allows in 64 of 64 cases"),
        ("fp8-e4m3", "the engine quantised no KV entry in 64 of 64 cases: the quantisation was not applied"),
        ("offload-host", "wrote no KV block to its offload tier and read none in 64 cases"),
        ("prefix-reuse", "no case of 64 was served from its cache"),
        ("span-reuse", "found no context span to reuse in 64 cases"),
    ],
)
def test_a_planted_no_op_is_an_error_in_run_and_report(
    kvgate: Invoke, reuse_workload: Path, tmp_path: Path, arm: str, evidence: str
) -> None:
    matrix = write_matrix(tmp_path / "m.toml", MATRIX + f'\n[faults."{arm}"]\nignore_treatment = true\n')
    code, report, stderr = run(kvgate, reuse_workload, matrix, tmp_path / "runs")
    assert code == 4, stderr
    arms = {a["arm"]: a for a in report["arms"]}
    assert arms[arm]["decision"] == "error" and arms[arm]["proof"]["status"] == "missing"
    assert evidence in arms[arm]["proof"]["missing"][0]
    others = [a for a in ARMS if a != arm]
    assert all(arms[a]["proof"]["status"] == "shown" and arms[a]["decision"] != "error" for a in others)
    line = f"kvgate: error: proof: arm {arm!r}: "
    assert [x for x in stderr.splitlines() if x.startswith("kvgate: error: proof")] == [
        next(x for x in stderr.splitlines() if x.startswith(line))
    ]
    again = kvgate("report", only_run(tmp_path / "runs"), "--format", "json")
    assert again.exit_code == 4
    assert any(x.startswith(line) and evidence in x for x in again.stderr.splitlines())
    junit = kvgate("report", only_run(tmp_path / "runs"), "--format", "junit").stdout
    assert "proof of treatment: MISSING" in junit and evidence in junit


def test_an_offload_tier_never_read_back_does_not_pass(
    kvgate: Invoke, accept_workload: Path, tmp_path: Path
) -> None:
    matrix = write_matrix(
        tmp_path / "m.toml",
        '[matrix]\ncontrol = "full"\ncandidates = ["offload-host"]\naa_replicate = false\n',
    )
    code, report, stderr = run(kvgate, accept_workload, matrix, tmp_path)
    assert code == 4, stderr
    arm = report["arms"][0]
    assert arm["decision"] == "error" and arm["slices"][0]["decision"] == "pass"  # the gate alone would pass
    assert arm["proof"]["tier_blocks_written"] > 0 and arm["proof"]["tier_blocks_read"] == 0
    assert "read none back" in arm["reason"] and "kv_blocks" in arm["reason"]
    pressed = write_matrix(tmp_path / "p.toml", matrix.read_text() + "[arm.offload-host]\nkv_blocks = 2\n")
    code, report, stderr = run(kvgate, accept_workload, pressed, tmp_path / "pressed")
    assert code == 0, stderr
    assert report["arms"][0]["proof"]["tier_blocks_read"] > 0


def test_parts_stored_before_the_evidence_columns_read_them_as_null(tmp_path: Path) -> None:
    row: dict[str, object] = {f.name: None for f in RESULT_SCHEMA_V3}
    row.update(case_id="c1", arm="fp8-e4m3", replicate=0, attempt=0, passed=True, output_token_ids=[1])
    part = tmp_path / "results" / "fp8-e4m3" / "part-00000.parquet"
    part.parent.mkdir(parents=True)
    table = pa.Table.from_pylist([row], schema=RESULT_SCHEMA_V3)
    pq.write_table(table.replace_schema_metadata({RESULT_VERSION_KEY: b"3"}), part)
    stored = read_results(tmp_path)
    assert [stored.column(c).to_pylist() for c in PROOF_COLUMNS] == [[None]] * len(PROOF_COLUMNS)
