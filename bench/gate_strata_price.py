"""The price of gating the context buckets (policy `strata`): the shipped policy beside `strata = []` on
the 150- and 1,500-case ruler, 10,000 simulated runs per point, every case a control pass.

    .venv/bin/python bench/gate_strata_price.py
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from workloads import scaled_suite

from kvgate.gate.policy import load_policy
from kvgate.gate.simulate import operating
from kvgate.report.analysis.gate_structure import gate_structure
from kvgate.report.analysis.run_data import read_workload_cases


def main() -> int:
    policy = load_policy(None)
    with tempfile.TemporaryDirectory() as tmp:
        for factor in (1, 10):
            cases = read_workload_cases(str(scaled_suite(Path(tmp), "ruler", factor)))
            for rule in (policy, replace(policy, strata=())):
                op = operating(gate_structure(cases, rule), rule, 10_000, seed=21)
                print(
                    f"ruler ×{factor} strata={list(rule.strata)}: power @2τ {op.power:.2%}, PASS @0 "
                    f"{op.at_zero.passes:.2%}, PASS @τ/2 {op.at_half_tau.passes:.2%}, false accept "
                    f"{op.false_accept:.2%}, false fail {op.false_fail:.2%}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
