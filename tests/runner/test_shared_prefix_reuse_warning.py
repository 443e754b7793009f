"""`kvgate run` warns once, in one line, when a reuse arm meets a shared prefix the workload counts as a
cluster per request (20 support requests behind one short system prompt, frozen by trace import under
the default `prefix_min_share`), on the fake engine; not without a reuse arm, not once the prefix is
declared one cluster, and not under a policy that declares its own clustering."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.cli import kvgate

from kvgate.gate.policy import Policy
from kvgate.runner.shared_prefix_reuse import shared_prefix_reuse_warning
from kvgate.treatments.matrix import resolve_matrix
from kvgate.workload.schema import read_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from workloads import shared_prompt_trace


def _warnings(tmp_path: Path, workload: Path, candidates: str) -> list[str]:
    matrix = tmp_path / f"m{len(list(tmp_path.glob('m*.toml')))}.toml"
    matrix.write_text(f'[matrix]\ncontrol = "full"\ncandidates = [{candidates}]\naa_replicate = false\n')
    run = kvgate("run", "--engine", "fake", "-w", workload, "-m", matrix, "-o", tmp_path / "runs", "--quiet")
    assert run.exit_code == 3, run.output  # 20 clean cases cannot pass at τ = 5%
    return [line for line in run.stderr.splitlines() if line.startswith("kvgate: warning:")]


def test_a_reuse_arm_over_a_split_system_prompt_is_warned_about_once(tmp_path: Path) -> None:
    workload = shared_prompt_trace(tmp_path)
    (line,) = _warnings(tmp_path, workload, '"prefix-reuse", "span-reuse"')
    (group,) = {c.slices["shared_prefix"] for c in read_workload(workload).cases}
    assert f"{group!r} (suite 'bot', task 'trace': 20 cases counted as 20 clusters)" in line
    assert "arms 'prefix-reuse', 'span-reuse' reuse cached KV" in line
    assert "not independent" in line and "prefix_min_share = 0" in line and "freeze again" in line
    assert _warnings(tmp_path, workload, '"fp8-e4m3"') == []  # no arm reuses KV


def test_no_warning_once_the_prefix_is_one_cluster(tmp_path: Path) -> None:
    workload = shared_prompt_trace(tmp_path, "prefix_min_share = 0\n")
    assert _warnings(tmp_path, workload, '"prefix-reuse"') == []


@pytest.mark.parametrize(
    ("declared", "warned"),
    [
        ({}, True),
        ({"defects": "per_cluster"}, True),
        ({"cluster": "none"}, False),
        ({"defects": "per_case"}, False),
        ({"cluster": "task"}, False),
    ],
)
def test_a_policy_that_declares_its_own_clustering_is_not_second_guessed(
    tmp_path: Path, declared: dict[str, str], warned: bool
) -> None:
    cases = read_workload(shared_prompt_trace(tmp_path)).cases
    line = shared_prefix_reuse_warning(resolve_matrix("reuse"), cases, Policy(**declared))
    assert (line is not None) == warned
