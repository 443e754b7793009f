"""Winnability against the control: a critical slice is judged on what the control passes. A declared
`expected_control_pass_rate` scales the pre-run check; after the control's pass, a critical slice its
passes cannot carry to a PASS is refused (exit 2) before any candidate generates (fixed and sequential
runs here; the Ray executor's in tests/executors/test_ray_executor.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from kvgate.cli import cli
from kvgate.errors import BadInput
from kvgate.gate.feasibility import check_control_winnable, check_winnable
from kvgate.gate.policy import Policy, parse_policy
from kvgate.rundir.store import part_paths
from kvgate.workload.freeze import freeze
from kvgate.workload.tokenizer import WordTokenizer

MATRIX = '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\naa_replicate = false\n'
CRITICAL = 'critical = ["task=qa"]\n'


@pytest.fixture(scope="module")
def qa_workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """80 independent `qa` cases (enough for a zero-failure PASS at τ = 5%: 59) beside 20 `chat` ones."""
    tmp = tmp_path_factory.mktemp("qa")
    trace = tmp / "qa.jsonl"
    records = [
        {
            "messages": [{"role": "user", "content": f"Question {i}: what is {i} plus {i}?"}],
            "expected": str(2 * i),
            "task": "qa" if i < 80 else "chat",
        }
        for i in range(100)
    ]
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))
    suite = tmp / "qa.toml"
    suite.write_text(f'name = "qa"\n[[trace]]\npath = "{trace}"\nvalidator = "exact"\n')
    out = tmp / "qa.parquet"
    freeze([str(suite)], out, WordTokenizer(), seed=0)
    return out


def _run(tmp_path: Path, workload: Path, policy: str, control_faults: str, *args: str) -> Result:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "p.toml").write_text(policy)
    (tmp_path / "m.toml").write_text(MATRIX + control_faults)
    return CliRunner().invoke(
        cli,
        [
            "run", "--engine", "fake", "-w", str(workload), "-m", str(tmp_path / "m.toml"),
            "--policy", str(tmp_path / "p.toml"), "-o", str(tmp_path / "runs"), "--quiet", *args,
        ],
    )  # fmt: skip


def _arms_stored(tmp_path: Path) -> dict[str, int]:
    """Rows stored per arm over every run under tmp_path/runs."""
    counts: dict[str, int] = {}
    for run_dir in (tmp_path / "runs").iterdir():
        if (run_dir / "manifest.json").exists():
            for part in part_paths(run_dir):
                for arm in pq.read_table(part, columns=["arm"])["arm"].to_pylist():
                    counts[arm] = counts.get(arm, 0) + 1
    return counts


def test_a_control_that_fails_half_the_slice_stops_the_run_before_any_candidate(
    qa_workload: Path, tmp_path: Path
) -> None:
    result = _run(tmp_path, qa_workload, CRITICAL, "[faults.full]\nwrong_answer_rate = 0.5\n")
    assert result.exit_code == 2, result.output
    *before, line = result.output.strip().splitlines()  # --quiet still names the run directory first
    assert all(b.startswith("kvgate: run ") for b in before) and len(before) <= 1
    assert line.startswith("kvgate: error: critical slice 'task=qa': the control passed ")
    passed = int(line.split("the control passed ")[1].split(" ")[0])
    assert 20 <= passed < 59 and "of its 80 cases" in line
    assert "needs at least 59 control passes: the run stops before any candidate generates" in line
    assert "allow_unwinnable = true" in line
    assert _arms_stored(tmp_path) == {"full": 100}  # the control's pass, and nothing of the candidate


def test_a_healthy_control_or_allow_unwinnable_lets_the_run_go_on(qa_workload: Path, tmp_path: Path) -> None:
    healthy = _run(tmp_path / "a", qa_workload, CRITICAL, "[faults.full]\nwrong_answer_rate = 0.1\n")
    assert healthy.exit_code in (0, 3), healthy.output
    assert _arms_stored(tmp_path / "a") == {"full": 100, "fp8-e4m3": 100}
    allowing = CRITICAL + "allow_unwinnable = true\n"
    allowed = _run(tmp_path / "b", qa_workload, allowing, "[faults.full]\nwrong_answer_rate = 0.5\n")
    assert allowed.exit_code == 3, allowed.output  # inconclusive: 'task=qa' has too few control passes
    assert _arms_stored(tmp_path / "b") == {"full": 100, "fp8-e4m3": 100}


def test_the_sequential_run_stops_at_the_first_look_that_proves_the_slice_unwinnable(
    qa_workload: Path, tmp_path: Path
) -> None:
    policy = CRITICAL + "sequential = true\nlook_every = 10\n"
    result = _run(tmp_path, qa_workload, policy, "[faults.full]\nwrong_answer_rate = 0.6\n")
    assert result.exit_code == 2, result.output
    assert "critical slice 'task=qa'" in result.output and "not generated yet" in result.output
    assert "the run stops before this look's candidates" in result.output
    stored = _arms_stored(tmp_path)
    assert 0 < stored["full"] < 100 and stored.get("fp8-e4m3", 0) < stored["full"]


def test_the_declared_control_pass_rate_scales_the_pre_run_check(qa_workload: Path, tmp_path: Path) -> None:
    result = _run(tmp_path, qa_workload, CRITICAL + "expected_control_pass_rate = 0.5\n", "")
    assert result.exit_code == 2, result.output
    assert "at the expected control pass rate 0.5 about 40 control passes" in result.output
    assert "needs at least 59" in result.output
    assert not (tmp_path / "runs").exists() or not _arms_stored(tmp_path)  # refused before any generation
    ran = _run(tmp_path / "ok", qa_workload, CRITICAL + "expected_control_pass_rate = 0.9\n", "")
    assert ran.exit_code == 0, ran.output  # 72 expected passes ≥ 59: the clean run passes


def test_expected_clusters_count_a_cluster_once_any_of_its_cases_passes() -> None:
    groups = [({"task": "qa"}, False, f"g{i // 4}") for i in range(320)]  # 80 clusters of 4
    policy = parse_policy('critical = ["task=qa"]\nexpected_control_pass_rate = 0.4\n', "p.toml")
    check_winnable(policy, groups)  # 80 · (1 − 0.6⁴) ≈ 69.6 clusters ≥ 59
    singles = [({"task": "qa"}, False, f"c{i}") for i in range(100)]
    with pytest.raises(BadInput, match=r"has 100 cases; .* about 40 control passes; .* needs at least 59"):
        check_winnable(policy, singles)


def test_control_passes_count_in_distinct_clusters() -> None:
    policy = Policy(critical=("task=qa",))
    # 120 cases in 60 clusters of 2; the control passes only the first case of each: 60 passes, 60 clusters
    cases = [({"task": "qa"}, False, f"g{i // 2}", i % 2 == 0) for i in range(120)]
    check_control_winnable(policy, cases)
    # passes only in clusters 0…29: 60 passes, but in 30 distinct clusters
    few = [({"task": "qa"}, False, f"g{i // 2}", i < 60) for i in range(120)]
    with pytest.raises(
        BadInput, match=r"passed 60 of its 120 cases in 30 distinct clusters; .* needs at least 59 "
    ):
        check_control_winnable(policy, few)
    pending = [
        (labels, c, key, None if i >= 60 else passed) for i, (labels, c, key, passed) in enumerate(few)
    ]
    check_control_winnable(policy, pending)  # the 30 clusters still to come may pass
    check_control_winnable(Policy(critical=("task=qa",), allow_unwinnable=True), few)


def test_min_control_passes_binds_on_the_control() -> None:
    policy = Policy(tau=0.2, critical=("task=qa",), min_control_passes=30)  # 14 clusters suffice for τ = 0.2
    cases = [({"task": "qa"}, False, f"c{i}", i < 25) for i in range(40)]
    with pytest.raises(
        BadInput, match=r"passed 25 of its 40 cases; .* needs at least 14 control passes and 30"
    ):
        check_control_winnable(policy, cases)


@pytest.mark.parametrize("value", ["0", "1.5", '"0.5"', "true"])
def test_the_rate_is_validated(value: str) -> None:
    with pytest.raises(BadInput, match=r"^p.toml: policy expected_control_pass_rate must be in \(0, 1\]"):
        parse_policy(f"expected_control_pass_rate = {value}\n", "p.toml")
