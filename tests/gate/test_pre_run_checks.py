"""Refused before anything is generated: a critical slice too small to ever pass, and a policy below the
safety floor without a stated reason. With `allow_unwinnable` or `--policy-unsafe-reason` the run goes
ahead, and the unsafe reason is stored in the manifest and printed on every report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kvgate.cli import cli
from kvgate.errors import BadInput
from kvgate.gate.feasibility import check_winnable, clusters_needed
from kvgate.gate.policy import Policy


def _run(tmp_path: Path, workload: Path, policy_text: str, *args: str) -> Result:
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text)
    runs = tmp_path / "runs"
    return CliRunner().invoke(
        cli, ["run", "--engine", "fake", "-w", str(workload), "--policy", str(policy), "-o", str(runs), *args]
    )


def test_clusters_needed_is_the_zero_failure_bound() -> None:
    assert clusters_needed(0.05, 0.95) == 59  # (1 − 0.05)^59 = 0.0485 ≤ 0.05 < (0.95)^58
    assert clusters_needed(0.1, 0.9) == 22
    assert clusters_needed(0.0, 0.95) is None


def test_a_critical_slice_too_small_to_pass_is_refused_before_generation(
    smoke_workload: Path, tmp_path: Path
) -> None:
    result = _run(tmp_path, smoke_workload, 'critical = ["task=passkey"]\n', "--quiet")
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and "critical slice 'task=passkey' has 24 cases" in line
    assert "needs at least 59" in line and "allow_unwinnable" in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").glob("*/manifest.json"))
    allowing = 'critical = ["task=passkey"]\nallow_unwinnable = true\n'
    allowed = _run(tmp_path, smoke_workload, allowing, "--json")
    assert allowed.exit_code == 3, allowed.output
    passkey = next(s for s in json.loads(allowed.stdout)["arms"][0]["slices"] if s["slice"] == "task=passkey")
    assert passkey["role"] == "gate" and passkey["passes_needed"] == 59


def test_clusters_count_against_a_critical_slice() -> None:
    cases = [({"task": "qa"}, True, f"group-{i // 4}") for i in range(80)]  # 80 cases in 20 groups
    with pytest.raises(BadInput, match=r"'critical' has 80 cases in 20 clusters; .* needs at least 59"):
        check_winnable(Policy(), cases)
    alone = [(labels, c, f"case-{i}") for i, (labels, c, _) in enumerate(cases)]
    check_winnable(Policy(cluster="none"), alone)


def test_tau_zero_is_refused_before_generation_unless_the_rule_is_point(
    smoke_workload: Path, tmp_path: Path
) -> None:
    """`kvgate run --tau 0` ran and reported "upper bound not yet under τ; more cases would settle it",
    which no number of cases does."""
    runs = tmp_path / "runs"
    args = ["run", "--engine", "fake", "-w", str(smoke_workload), "--tau", "0", "-o", str(runs), "--quiet"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "policy τ = 0: no number of cases can pass" in result.stderr
    assert "--tau 0.01" in result.stderr and not runs.exists()
    cases = [({"task": "qa"}, False, f"case-{i}") for i in range(80)]
    check_winnable(Policy(tau=0.0, rule="point"), cases)  # the estimate can be 0: winnable
    check_winnable(Policy(tau=0.0, allow_unwinnable=True), cases)
    with pytest.raises(BadInput, match="policy τ = 0"):
        check_winnable(Policy(tau=0.1, slice_tau={"all": 0.0}), cases)


def test_an_unsafe_policy_needs_a_reason_that_every_report_prints(
    smoke_workload: Path, tmp_path: Path
) -> None:
    refused = _run(tmp_path, smoke_workload, "confidence = 0.6\n", "--quiet")
    assert refused.exit_code == 2
    assert "unsafe policy (confidence 0.6 < 0.8)" in refused.output
    assert "--policy-unsafe-reason" in refused.output
    reason = "exploratory run, not a release gate"
    ran = _run(tmp_path, smoke_workload, "confidence = 0.6\n", "--quiet", "--policy-unsafe-reason", reason)
    assert ran.exit_code in (0, 1, 3), ran.output
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if (p / "manifest.json").exists()]
    assert json.loads((run_dir / "manifest.json").read_text())["policy_unsafe_reason"] == reason
    for fmt in ("table", "md", "json"):
        out = CliRunner().invoke(cli, ["report", str(run_dir), "--format", fmt]).stdout
        assert reason in out, fmt
    point = tmp_path / "point.toml"
    point.write_text('rule = "point"\n')
    changed = CliRunner().invoke(
        cli, ["report", str(run_dir), "--policy", str(point), "--policy-changed-reason", "look"]
    )
    assert changed.exit_code == 2 and 'rule "point"' in changed.output
