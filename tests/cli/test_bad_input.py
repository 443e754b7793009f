"""Bad input to `kvgate run`: one line naming the problem, exit 2, no traceback, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kvgate.cli import cli


def run(args: list[str], runs: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["run", "--engine", "fake", "-o", str(runs), "--quiet", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("policy_text", "message"),
    [
        ("tau = 1.5\n", "tau must be in [0, 1], got 1.5"),
        ("tau = -0.1\n", "tau must be in [0, 1], got -0.1"),
        ("tua = 0.1\n", "unknown key 'tua'; did you mean 'tau'?"),
        ("rule = 'median'\n", "rule must be one of upper_bound, point"),
    ],
)
def test_bad_policy(tmp_path: Path, smoke_workload: Path, policy_text: str, message: str) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(policy_text)
    code, output = run(["-w", str(smoke_workload), "--policy", str(policy)], tmp_path / "runs")
    assert code == 2
    assert message in output
    assert len(output.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_unknown_treatment_in_matrix(tmp_path: Path, smoke_workload: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text('[matrix]\ncontrol = "full"\ncandidates = ["streamin-50"]\n')
    code, output = run(["-w", str(smoke_workload), "-m", str(matrix)], tmp_path / "runs")
    assert code == 2
    assert "unknown treatment 'streamin-50'; did you mean 'streaming-50'?" in output


def test_unknown_treatment_key(tmp_path: Path, smoke_workload: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(
        '[matrix]\ncontrol = "full"\ncandidates = ["ev"]\n'
        '[treatment.ev]\nkind = "eviction"\nmethod = "snapkv"\nratoi = 0.5\n'
    )
    code, output = run(["-w", str(smoke_workload), "-m", str(matrix)], tmp_path / "runs")
    assert code == 2
    assert "unknown key 'ratoi'; did you mean 'ratio'?" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine", "vlm"], "unknown engine 'vlm'; did you mean 'vllm'?"),
        (["--model", "smollm2-13m"], "unknown model 'smollm2-13m'; did you mean 'smollm2-135m'?"),
        (["-m", "defualt"], "unknown matrix 'defualt'; did you mean 'default'?"),
        (["-w", "missing.parquet"], "workload missing.parquet does not exist"),
        (["--limit", "0"], "--limit must be ≥ 1"),
    ],
)
def test_unknown_names(tmp_path: Path, smoke_workload: Path, args: list[str], message: str) -> None:
    base = [] if "-w" in args else ["-w", str(smoke_workload)]
    code, output = run([*base, *args], tmp_path / "runs")
    assert code == 2, output
    assert message in output
    assert "Traceback" not in output
