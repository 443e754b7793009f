"""The gate end to end against its simulation: many fake-engine runs at CFR = τ, each with its own fault
seed, decided by `kvgate run` from stored rows, beside `kvgate simulate`'s shares for the same workload
and policy. Agreement says the simulation models what the runner and the report actually do.

    .venv/bin/python bench/gate_end_to_end.py [--runs 200] [--factor 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import common
import numpy as np
from click.testing import CliRunner
from workloads import scaled_suite

from kvgate.cli import cli
from kvgate.gate.policy import load_policy
from kvgate.gate.simulate import Scenario, operating
from kvgate.report.analysis.gate_structure import gate_structure
from kvgate.report.analysis.run_data import read_workload_cases

EXIT_NAMES = {0: "pass", 1: "fail", 3: "inconclusive"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--factor", type=int, default=10, help="ruler's cases per cell multiplied by this")
    args = parser.parse_args()
    load_before = common.load_average()
    policy = load_policy(None)
    tau = policy.tau
    counts = {"pass": 0, "fail": 0, "inconclusive": 0}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        workload = scaled_suite(tmp, "ruler", args.factor)
        runner = CliRunner()
        for seed in range(args.runs):
            matrix = tmp / f"m{seed}.toml"
            matrix.write_text(
                '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\n'
                f"[faults.fp8-e4m3]\nwrong_answer_rate = {tau}\nseed = {seed}\n"
            )
            out = tmp / f"runs{seed}"
            result = runner.invoke(
                cli,
                [
                    "run",
                    "--engine",
                    "fake",
                    "-w",
                    str(workload),
                    "-m",
                    str(matrix),
                    "-o",
                    str(out),
                    "--quiet",
                ],
            )
            if result.exit_code not in EXIT_NAMES:
                print(result.output, file=sys.stderr)
                return 1
            counts[EXIT_NAMES[result.exit_code]] += 1
        structure = gate_structure(read_workload_cases(str(workload)), policy)
        sim = operating(structure, policy, 10_000, seed=9, scenario=Scenario()).at_tau
    shares = {k: v / args.runs for k, v in counts.items()}
    simulated = {"pass": sim.passes, "fail": sim.fails, "inconclusive": sim.inconclusive}
    rows = []
    for name in ("pass", "fail", "inconclusive"):
        se = np.sqrt(simulated[name] * (1 - simulated[name]) / args.runs + 1e-12)
        rows.append([name, counts[name], f"{100 * shares[name]:.1f}%", f"{100 * simulated[name]:.2f}%",
                     f"{(shares[name] - simulated[name]) / se:+.2f}" if se > 1e-6 else "—"])  # fmt: skip
    md = (
        "## Gate end to end against its simulation (fake engine, CFR = τ)\n\n"
        + common.provenance([sys.executable, *sys.argv], load_before)
        + f"- {args.runs} runs of `kvgate run --engine fake` on ruler ×{args.factor} "
        f"({structure.n_cases} cases), fp8-e4m3 with wrong_answer_rate = τ = {tau:g} at fault seeds "
        f"0…{args.runs - 1}, shipped policy; simulated: 10,000 runs of `kvgate simulate` on the same "
        "workload\n- z: (end to end − simulated) / the end-to-end share's binomial standard error\n\n"
        + common.table(["verdict", "runs", "end to end", "simulated", "z"], rows)
    )
    common.write_section("gate_end_to_end", md, {"counts": counts, "simulated": simulated})
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
