"""A trace of 20 requests behind one short system prompt, with per-case failures, frozen as trace import
freezes it: the gate on that workload's own structure has the power of 20 independent cases (checked
against an independent Monte Carlo), where the same requests declared one cluster (`prefix_min_share =
0`) never decide. 10,000 runs per point."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.independent_gate import independent_rates

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from workloads import shared_prompt_trace

from kvgate.gate.policy import load_policy
from kvgate.gate.simulate import operating
from kvgate.report.analysis.gate_structure import gate_structure
from kvgate.report.analysis.run_data import read_workload_cases

RUNS = 10_000


@pytest.mark.slow
def test_per_case_failures_behind_a_short_system_prompt_decide_as_20_independent_cases(
    tmp_path: Path,
) -> None:
    policy = load_policy(None)
    structure = gate_structure(read_workload_cases(str(shared_prompt_trace(tmp_path, ""))), policy)
    assert int(structure.clusters.max()) + 1 == 20
    op = operating(structure, policy, runs=RUNS, seed=7)
    se = op.standard_error
    assert op.false_fail <= policy.alpha + 3 * se(policy.alpha)
    for cfr, rates in ((policy.tau, op.at_tau), (2 * policy.tau, op.at_2tau), (4 * policy.tau, op.at_4tau)):
        ref = independent_rates(structure, policy, cfr, RUNS, seed=8)
        tol = 4 * np.sqrt(se(rates.fails) ** 2 + se(ref["fails"]) ** 2) + 1e-3
        assert abs(rates.fails - ref["fails"]) <= tol, (cfr, rates.fails, ref["fails"])
    assert op.power > 0.1 and op.at_4tau.fails > 0.5  # 13% and 59% as bench/gate_one_cluster.py measures
    declared_one = shared_prompt_trace(tmp_path, "prefix_min_share = 0\n")
    one = gate_structure(read_workload_cases(str(declared_one)), policy)
    assert int(one.clusters.max()) + 1 == 1
    lone = operating(one, policy, runs=RUNS, seed=7)
    assert lone.power == 0.0 and lone.at_4tau.fails == 0.0  # a lone cluster never fails the arm at α ≤ τ
