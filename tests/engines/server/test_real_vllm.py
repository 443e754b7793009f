"""Acceptance on this machine: `kvgate run --engine server` with kvgate launching `vllm serve` of the
embedded model gives the control and prefix caching the in-process `vllm` engine's tokens, with the cached
prompt tokens checked. Minutes on a CPU (a server start per arm), so it runs only when asked:

    KVGATE_SERVER_ACCEPTANCE=1 .venv/bin/python -m pytest -q tests/engines/server/test_real_vllm.py
"""

from __future__ import annotations

import importlib.util
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
