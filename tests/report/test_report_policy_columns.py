"""`kvgate report RUN --policy P` checks the columns P names against the run's cases as `kvgate run`
checks them against its workload (gate.policy_slices), and so does `kvgate simulate -w W --policy P`: a
`strata` column the cases lack gated no stratum, silently, and a `cluster` or slice column they lack was
refused in other words than the run's. One line, exit 2, naming the column and the columns there are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import finished_fake_run, kvgate


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return finished_fake_run(tmp_path_factory.mktemp("finished"))


COLUMNS = "its slice columns: task, ctx_bucket, depth_bucket"


@pytest.mark.parametrize(
    ("policy_text", "phrases"),
    [
        (
            'strata = ["ctx_buckt"]\n',
            ("policy strata 'ctx_buckt'", "did you mean 'ctx_bucket'?", "correct `strata`"),
        ),
        ('strata = ["region"]\n', ("policy strata 'region'", "has no slice column 'region'")),
        ('cluster = "tsk"\n', ("policy cluster 'tsk'", "did you mean 'task'?", "correct `cluster`")),
        ('critical = ["tsak=passkey"]\n', ("policy slice 'tsak=passkey'", "did you mean 'task'?")),
    ],
)
def test_a_column_the_run_lacks_is_refused_naming_the_columns_it_has(
    finished_run: Path, tmp_path: Path, policy_text: str, phrases: tuple[str, ...]
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("tau = 0.3\n" + policy_text)
    result = kvgate("report", finished_run, "--policy", policy, "--policy-changed-reason", "try another")
    assert result.exit_code == 2, result.output
    assert result.stdout == "", "refused before any report is printed"
    assert result.stderr.startswith("kvgate: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert all(p in result.stderr for p in (*phrases, COLUMNS)), result.stderr


def test_columns_the_run_has_are_gated(finished_run: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('tau = 0.3\nstrata = ["depth_bucket"]\ncluster = "task"\n')
    result = kvgate(
        "report", finished_run, "--policy", policy, "--policy-changed-reason", "x", "--format", "json"
    )
    assert result.exit_code in (0, 1, 3), result.output
    assert json.loads(result.stdout)["policy"]["strata"] == ["depth_bucket"]


def test_simulate_on_a_workload_checks_the_columns_too(finished_run: Path, tmp_path: Path) -> None:
    """`simulate -w W --policy P` with a strata typo simulated a gate with no strata."""
    policy = tmp_path / "policy.toml"
    policy.write_text('tau = 0.3\nstrata = ["ctx_buckt"]\n')
    workload = finished_run.parent / "w.parquet"
    result = kvgate("simulate", "-w", workload, "--policy", policy, "--runs", "10")
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert f"policy strata 'ctx_buckt': workload {workload} has no slice column 'ctx_buckt'" in result.stderr
    assert COLUMNS in result.stderr
