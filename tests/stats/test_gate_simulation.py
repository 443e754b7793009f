"""`kvgate simulate`: simulated operating characteristics agree with the exact binomial sums, are seeded,
and keep the upper-bound rule's promise (false accepts at CFR = τ at most 1 − confidence)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kvgate.cli import cli
from kvgate.gate.policy import Policy
from kvgate.stats.simulate import exact, operating


@pytest.mark.parametrize("n", [24, 60, 150, 400])
def test_simulation_agrees_with_exact_sums(n: int) -> None:
    op = operating(n, Policy(), runs=10_000, seed=1)
    for sim, ref in ((op.at_tau, op.exact_at_tau), (op.at_2tau, op.exact_at_2tau)):
        for attr in ("passes", "fails", "inconclusive"):
            s, r = getattr(sim, attr), getattr(ref, attr)
            assert abs(s - r) <= 4 * max(op.standard_error(r), 1e-4), (attr, s, r)
        assert sim.passes + sim.fails + sim.inconclusive == pytest.approx(1.0)


def test_upper_bound_rule_bounds_false_accepts_and_point_rule_does_not() -> None:
    policy = Policy(tau=0.05, confidence=0.95, min_control_passes=1)
    for n in range(1, 600, 7):
        assert exact(n, 0.05, policy).passes <= 0.05 + 1e-12
    point = Policy(tau=0.05, rule="point", min_control_passes=1)
    assert exact(400, 0.05, point).passes > 0.4


def test_seeded_and_reproducible() -> None:
    a, b = operating(100, Policy(), 5_000, seed=3), operating(100, Policy(), 5_000, seed=3)
    assert a == b
    assert operating(100, Policy(), 5_000, seed=4).at_tau != a.at_tau


def test_cli_simulate_json_and_table(tmp_path) -> None:  # type: ignore[no-untyped-def]
    policy = tmp_path / "p.toml"
    policy.write_text("tau = 0.1\nmin_control_passes = 5\n")
    result = CliRunner().invoke(
        cli, ["simulate", "--policy", str(policy), "--n", "50", "--runs", "2000", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    point = data["points"][0]
    assert data["policy"]["tau"] == 0.1 and data["runs"] == 2000 and point["n"] == 50
    assert point["false_accept"] == point["at_tau"]["passes"] <= 0.1
    assert point["power"] == point["at_2tau"]["fails"]
    table = CliRunner().invoke(cli, ["simulate", "--n", "100", "--runs", "1000"])
    assert table.exit_code == 0
    assert "false accept @τ" in table.output and "100" in table.output


@pytest.mark.parametrize(
    ("args", "message"), [(["--n", "0"], "--n must be ≥ 1"), (["--runs", "0"], "--runs must be")]
)
def test_cli_simulate_bad_input(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["simulate", *args])
    assert result.exit_code == 2
    assert message in result.output
