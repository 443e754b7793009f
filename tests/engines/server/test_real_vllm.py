"""Acceptance on this machine: `kvgate run --engine server` with kvgate launching `vllm serve` of the
embedded model gives the control and prefix caching the in-process `vllm` engine's tokens, with the cached
prompt tokens checked; and prefix caching stays token-identical to the control under the abort schedule
and a small KV pool, with the counts in the report; the in-process engine likewise under interleaving,
re-sends and repeats. Minutes on a CPU (a server start per arm), so it runs
only when asked:

    KVGATE_SERVER_ACCEPTANCE=1 .venv/bin/python -m pytest -q tests/engines/server/test_real_vllm.py
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvgate.cli import cli
from kvgate.rundir.store import read_results

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("KVGATE_SERVER_ACCEPTANCE") != "1", reason="set KVGATE_SERVER_ACCEPTANCE=1 (minutes)"
    ),
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm is not installed"),
]
MATRIX = '[matrix]\ncontrol = "full"\ncandidates = ["prefix-reuse"]\naa_replicate = false\n'


def tokens(run_dir: Path) -> dict[tuple[str, str], tuple[list[int], int]]:
    rows = read_results(run_dir, ["case_id", "arm", "output_token_ids", "n_cached_tokens", "fail_kind"])
    out = {}
    for row in rows.to_pylist():
        assert row["fail_kind"] not in ("engine_error", "timeout"), row
        out[(row["arm"], row["case_id"])] = (row["output_token_ids"], row["n_cached_tokens"])
    return out


def test_served_arms_match_the_in_process_engine(model_folder: Path, tmp_path: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX)
    base = ["run", "-m", str(matrix), "--limit", "4", "--quiet"]
    served = CliRunner().invoke(cli, [*base, "--engine", "server", "--run-dir", str(tmp_path / "server")])
    assert served.exit_code == 3, served.output  # 4 cases cannot pass; an engine error would exit 4
    local = CliRunner().invoke(cli, [*base, "--engine", "vllm", "--run-dir", str(tmp_path / "vllm")])
    assert local.exit_code == 3, local.output
    a, b = tokens(tmp_path / "server"), tokens(tmp_path / "vllm")
    assert a.keys() == b.keys() and len(a) == 8
    assert all(a[key][0] == b[key][0] for key in a)
    assert all(cached == 0 for (arm, _), (_, cached) in a.items() if arm == "full")
    assert all(cached > 0 for (arm, _), (_, cached) in a.items() if arm == "prefix-reuse")


STRESSED = MATRIX + "[load]\nconcurrency = 4\nkv_blocks = 24\nabort_percent = 50\n"


def test_prefix_reuse_stays_token_identical_under_aborts_and_a_small_pool(
    model_folder: Path, tmp_path: Path
) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(STRESSED)
    run_dir = tmp_path / "run"
    args = ["run", "-m", str(matrix), "--limit", "8", "--engine", "server", "--run-dir", str(run_dir)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 3, result.output  # no defect (1), no engine or isolation error (4)
    rows = tokens(run_dir)
    assert len(rows) == 16
    assert all(
        rows[("prefix-reuse", case)][0] == rows[("full", case)][0] for (arm, case) in rows if arm == "full"
    )
    report = json.loads(CliRunner().invoke(cli, ["report", str(run_dir), "--format", "json"]).stdout)
    stress = report["arms"][0]["stress"]
    assert stress["load"]["kv_blocks"] == 24 and stress["load"]["abort_percent"] == 50
    assert stress["counts"]["aborts"] > 0 and stress["counts"]["preemptions"] is not None


SOAK = MATRIX + "[load]\ninterleave = true\nresend_percent = 50\nrepeat = 2\n"


def test_in_process_vllm_runs_interleaving_re_sends_and_repeats(model_folder: Path, tmp_path: Path) -> None:
    """The in-process engine under A → B → A, re-sends after churn and a soak of two repeats: prefix
    reuse token-identical to the control, each schedule counted in its pass record."""
    matrix = tmp_path / "m.toml"
    matrix.write_text(SOAK)
    run_dir = tmp_path / "run"
    args = ["run", "-m", str(matrix), "--limit", "4", "--engine", "vllm", "--run-dir", str(run_dir)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 3, result.output
    rows = tokens(run_dir)
    assert all(
        rows[("prefix-reuse", case)][0] == rows[("full", case)][0] for (arm, case) in rows if arm == "full"
    )
    report = json.loads(CliRunner().invoke(cli, ["report", str(run_dir), "--format", "json"]).stdout)
    counts = report["arms"][0]["stress"]["counts"]
    assert counts["interleaved"] == 8 and counts["repeats"] == 4 and counts["resent"] > 0
    assert counts["repeat_changed"] == 0
