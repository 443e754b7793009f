"""`kvgate simulate` on real workloads' slice structures: the arm-level error rates of the default policy
stay within α, and an independent Monte Carlo (its own counts, scipy.stats tails and quantiles, and Holm
by fixed-point iteration instead of sorting) reproduces them within Monte Carlo error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.gate_workloads import Workloads
from helpers.independent_gate import independent_rates

from kvgate.cli import cli
from kvgate.gate.policy import Policy, load_policy
from kvgate.gate.simulate import Scenario, Structure, _Counter, operating
from kvgate.report.analysis.gate_structure import gate_structure
from kvgate.report.analysis.run_data import read_workload_cases

RUNS = 10_000


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ruler", "ruler-1500"])
def test_default_policy_error_rates_reproduced_independently(workloads: Workloads, name: str) -> None:
    policy = load_policy(None)
    structure = gate_structure(read_workload_cases(str(workloads[name])), policy)
    op = operating(structure, policy, runs=RUNS, seed=0)
    alpha = policy.alpha
    se = op.standard_error
    assert op.false_fail <= alpha + 3 * se(alpha), op.at_tau
    assert op.false_accept <= alpha + 3 * se(alpha), op.at_tau
    points = ((policy.tau, op.at_tau), (2 * policy.tau, op.at_2tau), (policy.tau / 2, op.at_half_tau))
    for cfr, rates in points:
        ref = independent_rates(structure, policy, cfr, RUNS, seed=1)
        for key in ("fails", "passes"):
            mine = getattr(rates, key)
            tol = 4 * np.sqrt(se(mine) ** 2 + se(ref[key]) ** 2) + 1e-3
            assert abs(mine - ref[key]) <= tol, (name, cfr, key, mine, ref[key])


@pytest.mark.slow
def test_clustered_defects_are_covered_only_with_clusters(workloads: Workloads) -> None:
    cases = read_workload_cases(str(workloads["reuse"]))
    whole_groups = Scenario(defects="cluster")
    naive = Policy(cluster="none", strata=())
    naive_op = operating(gate_structure(cases, naive), naive, runs=RUNS, seed=2, scenario=whole_groups)
    assert naive_op.false_accept > 0.3  # 16 groups of 4 counted as 64 independent cases: under-covers
    policy = Policy(strata=())
    op = operating(gate_structure(cases, policy), policy, runs=RUNS, seed=2, scenario=whole_groups)
    assert op.false_accept <= policy.alpha and op.false_fail <= policy.alpha


def test_simulated_cluster_counts_are_the_distinct_clusters_with_a_pass(workloads: Workloads) -> None:
    """The counter's clusters per slice against a direct count: its prefix groups of four on the reuse
    suite, and single cases with `cluster = "none"`."""
    cases = read_workload_cases(str(workloads["reuse"]))
    rng = np.random.default_rng(4)
    for policy in (Policy(), Policy(cluster="none")):
        structure = gate_structure(cases, policy)
        counter = _Counter(structure)
        control = rng.random((50, structure.n_cases)) < 0.6
        passes, grouped = counter.slices(control), counter.grouped(control, control)
        assert (grouped is None) == (policy.cluster == "none")
        member = structure.membership.toarray() > 0
        direct = [
            [np.unique(structure.clusters[member[s] & run]).size for s in range(member.shape[0])]
            for run in control
        ]
        np.testing.assert_array_equal(counter.clusters(passes, grouped), direct)


@pytest.mark.slow
def test_aa_noise_keeps_false_fails_within_alpha() -> None:
    policy = Policy()
    op = operating(Structure.single(300, policy), policy, runs=RUNS, seed=3, scenario=Scenario(aa_rate=0.03))
    assert op.false_fail <= policy.alpha + 3 * op.standard_error(policy.alpha)


def test_seeded_and_reproducible() -> None:
    structure = Structure.single(100, Policy())
    a, b = (operating(structure, Policy(), 4_000, seed=3) for _ in range(2))
    assert a == b
    assert operating(structure, Policy(), 4_000, seed=4).at_tau != a.at_tau


def test_cli_simulate_workload_json_and_table(workloads: Workloads, tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text('tau = 0.1\ncritical = ["task=needle"]\n')
    args = ["simulate", "--policy", str(policy), "-w", str(workloads["ruler"]), "--runs", "2000"]
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    point = data["points"][0]
    assert (
        data["policy"]["tau"] == 0.1 and point["cases"] == 150 and point["gated"] == 5
    )  # all, task=needle, 3 ctx buckets
    assert point["false_fail"]["rate"] == point["at_tau"]["fails"] <= 0.1
    assert point["power"]["rate"] == point["at_2tau"]["fails"] and point["power"]["mc_se"] > 0
    table = CliRunner().invoke(cli, ["simulate", "--n", "100", "--runs", "1000"])
    assert table.exit_code == 0
    assert "false fail" in table.output and "n=100" in table.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--n", "0"], "--n must be in"),
        (["--runs", "0"], "--runs must be"),
        (["--aa-rate", "2"], "--aa-rate"),
        (["--n", "2000000000"], "--n must be in"),
    ],
)
def test_cli_simulate_bad_input(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["simulate", *args])
    assert result.exit_code == 2
    assert message in result.output
