"""The sequential gate: its looks and α spending, its arm-level error rates by simulation (≥ 10,000
runs), and sequential runs on the fake engine: fewer generations with the same verdicts, and a run killed
with SIGKILL and resumed stops where an uninterrupted one does, with the same report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.gate_workloads import Workloads

from kvgate.cli import cli
from kvgate.gate.policy import Policy
from kvgate.gate.sequential import look_ends, spent_alpha, stratified_order
from kvgate.gate.simulate import operating
from kvgate.report.analysis.gate_structure import gate_structure
from kvgate.report.analysis.run_data import read_workload_cases
from kvgate.rundir.manifest import spec_hash_of_run_id

MATRIX = (
    '[matrix]\ncontrol = "full"\ncandidates = ["streaming-50", "fp8-e4m3"]\naa_replicate = true\n'
    "[faults.fp8-e4m3]\nwrong_answer_rate = 0.3\n"
)


def test_looks_spend_exactly_alpha() -> None:
    assert list(look_ends(150, 50)) == [50, 100, 150] and list(look_ends(160, 50)) == [50, 100, 150, 160]
    alphas = spent_alpha(0.05, look_ends(1500, 100), 2.0)
    assert alphas.sum() == pytest.approx(0.05) and alphas[0] == pytest.approx(0.05 / 225)
    assert np.all(np.diff(alphas) > 0)  # ρ = 2 spends more as the looks go on


def test_order_is_a_permutation_that_spreads_every_stratum() -> None:
    strata = np.array([0] * 190 + [1] * 10)
    order = stratified_order(strata, seed=7)
    assert sorted(order) == list(range(200))
    positions = np.flatnonzero(strata[order] == 1)
    assert np.all(np.diff(positions) <= 40)  # the 10 critical cases spread over the order, none starved
    assert list(order) == list(stratified_order(strata, seed=7))


@pytest.mark.slow
def test_sequential_error_rates_and_price(workloads: Workloads) -> None:
    cases = read_workload_cases(str(workloads["ruler"]))
    fixed = Policy(strata=())  # 150 cases: its 3 context buckets of 50 could never pass alone
    sequential = Policy(sequential=True, look_every=50, strata=())
    structure = gate_structure(cases, fixed)
    seq = operating(structure, sequential, runs=10_000, seed=5)
    ref = operating(structure, fixed, runs=10_000, seed=5)
    bound = fixed.alpha + 3 * seq.standard_error(fixed.alpha)
    assert seq.false_accept <= bound and seq.false_fail <= bound, seq.at_tau
    assert ref.power - seq.power <= 0.10  # the price of three looks on 150 cases (measured: 7.5 points)
    assert seq.at_zero.generated <= 0.7 * 150 and seq.at_4tau.generated <= 0.5 * 150
    assert ref.at_zero.generated == 150


def _report(run_dir: Path) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["report", str(run_dir), "--format", "json"])
    data: dict[str, Any] = json.loads(result.stdout)
    data["run"].pop("created_at", None)
    data["run"].pop("git_commit", None)  # a commit made while the test runs is not the runs' difference
    data["run"]["run_id"] = spec_hash_of_run_id(data["run"]["run_id"])  # each run is new; its spec is not
    for arm in data["arms"]:
        arm.pop("gains", None)  # timings
    return data


def _rows(run_dir: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in (run_dir / "results").rglob("part-*.parquet"))


def test_sequential_run_generates_less_with_the_same_verdicts(workloads: Workloads, tmp_path: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX)
    policy = tmp_path / "p.toml"
    policy.write_text("sequential = true\nlook_every = 25\nstrata = []\n")
    fixed_policy = tmp_path / "fixed.toml"
    fixed_policy.write_text("strata = []\n")
    runs = {}
    for name, args in (("fixed", ["--policy", str(fixed_policy)]), ("sequential", ["--policy", str(policy)])):
        out = tmp_path / name
        result = CliRunner().invoke(
            cli, ["run", "--engine", "fake", "-w", str(workloads["ruler"]), "-m", str(matrix), "-o", str(out),
                  "--quiet", *args],
        )  # fmt: skip
        assert result.exit_code == 1, result.output  # fp8 fails either way
        (runs[name],) = [p for p in out.iterdir() if (p / "manifest.json").exists()]
    fixed, seq = _report(runs["fixed"]), _report(runs["sequential"])
    assert [(a["arm"], a["decision"]) for a in seq["arms"]] == [
        (a["arm"], a["decision"]) for a in fixed["arms"]
    ]
    stops = {a["arm"]: a["sequential"] for a in seq["arms"]}
    # 30% wrong answers against a replicate that never flips: look 1 spends α = 0.0014 (and the paired
    # check aa_alpha's share of it, 0.0083), which 25 cases rarely clear; look 2 does
    assert stops["fp8-e4m3"]["look"] <= 2 and stops["fp8-e4m3"]["cases"] <= 50
    assert stops["streaming-50"]["cases"] < 150 and "PASS is final" in stops["streaming-50"]["why"]
    assert _rows(runs["sequential"]) <= 0.6 * _rows(runs["fixed"])
    table = CliRunner().invoke(cli, ["report", str(runs["sequential"])]).stdout
    fp8 = stops["fp8-e4m3"]
    assert f"sequential: stopped at {fp8['cases']} of 150 cases after look {fp8['look']} of 6" in table


def test_kill_and_resume_stops_at_the_same_looks(workloads: Workloads, tmp_path: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX + '[faults."*"]\nlatency_s = 0.01\n')
    policy = tmp_path / "p.toml"
    policy.write_text("sequential = true\nlook_every = 25\nstrata = []\n")
    args = [
        "run",
        "--engine",
        "fake",
        "-w",
        str(workloads["ruler"]),
        "-m",
        str(matrix),
        "--policy",
        str(policy),
    ]
    whole = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "whole"), "--quiet"])
    assert whole.exit_code == 1, whole.output
    (whole_dir,) = [p for p in (tmp_path / "whole").iterdir() if (p / "manifest.json").exists()]
    code = "import sys; from kvgate.cli import main; sys.argv = ['kvgate', *sys.argv[1:]]; main()"
    killed = subprocess.Popen(
        [sys.executable, "-c", code, *args, "-o", str(tmp_path / "killed"), "--quiet"],
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list((tmp_path / "killed").glob("*/results/*/part-*.parquet")):
        time.sleep(0.05)
    time.sleep(0.3)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    (killed_dir,) = [p for p in (tmp_path / "killed").iterdir() if (p / "manifest.json").exists()]
    assert _rows(killed_dir) < _rows(whole_dir)
    resumed = CliRunner().invoke(cli, ["run", "--resume", str(killed_dir), "--quiet"])
    assert resumed.exit_code == 1, resumed.output
    assert _report(killed_dir) == _report(whole_dir)
    assert _rows(killed_dir) == _rows(whole_dir)


@pytest.mark.parametrize(
    ("text", "rule"),
    [("look_every = 50\nstrata = []\n", "sequential"),
     ('sequential = "anytime"\nlook_every = 10\nstrata = []\n', "anytime")],
)  # fmt: skip
def test_cli_simulate_sequential_compares_both_gates(
    workloads: Workloads, tmp_path: Path, text: str, rule: str
) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text(text)
    args = ["simulate", "--policy", str(policy), "-w", str(workloads["ruler"]), "--runs", "2000"]
    result = CliRunner().invoke(cli, [*args, "--sequential", "--json"])
    assert result.exit_code == 0, result.output
    fixed, seq = json.loads(result.output)["points"]
    assert (fixed["rule"], seq["rule"]) == ("fixed-n", rule)
    assert fixed["at_zero"]["generated"] == 150 and seq["at_zero"]["generated"] < 150
    assert seq["false_fail"]["rate"] <= 0.05 + 3 * seq["false_fail"]["mc_se"] + 0.01


def test_anytime_policy_parses_and_refuses_clustered_cases() -> None:
    from kvgate.errors import BadInput
    from kvgate.gate.policy import parse_policy
    from kvgate.gate.procedure import Clusters, Family, SliceCounts, decide_arm

    policy = parse_policy('sequential = "anytime"\n', "p.toml")
    assert policy.sequential and policy.anytime
    assert parse_policy('sequential = "looks"\n', "p.toml").sequential
    with pytest.raises(BadInput, match='sequential must be true, false, "looks" or "anytime"'):
        parse_policy('sequential = "sometimes"\n', "p.toml")
    grouped = Clusters(np.zeros(1, dtype=np.int64), np.array([4]), np.array([0]))
    counts = SliceCounts(np.array([0]), np.array([4]), np.array([1]), grouped=grouped)
    with pytest.raises(BadInput, match='defects = "per_case"'):
        decide_arm(counts, Family(np.array([0.05]), np.array([True])), policy)
