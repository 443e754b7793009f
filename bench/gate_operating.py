"""The gate's arm-level error rates on real workloads' slice structures: the decision rule kvgate used
before (every slice tested alone at full α, min_control_passes holding back FAIL as well as PASS, cases
taken as independent) beside the current procedure (gate.procedure, through `gate.simulate.operating`),
on the same workloads and the shipped default policy.

Workloads are frozen here with the word tokenizer (the slice structure does not depend on the model):
`ruler` (150 cases), `ruler` with ten times the cases per cell (1,500) and `reuse` (64 cases in 16
prefix groups, with defects that fail a whole group). Every case is a control pass.

    .venv/bin/python bench/gate_operating.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import common
import numpy as np
from workloads import scaled_suite

from kvgate.gate.policy import Policy, load_policy
from kvgate.gate.simulate import Scenario, Structure, operating
from kvgate.report.analysis.gate_structure import gate_structure
from kvgate.report.analysis.run_data import read_workload_cases
from kvgate.stats.intervals import cp_bounds


def previous_rule(
    structure: Structure, policy: Policy, cfr: float, runs: int, seed: int, defects: str
) -> dict:
    """Arm pass/fail shares under the earlier rule, with its own seeded draws."""
    member = structure.membership.toarray().astype(np.int64)
    tau, gated = structure.family.tau, structure.family.gated
    n = member.sum(axis=1)
    rng = np.random.default_rng(seed)
    if defects == "cluster":
        hit = rng.random((runs, int(structure.defect_groups.max()) + 1)) < cfr
        fails = hit[:, structure.defect_groups]
    else:
        fails = rng.random((runs, structure.n_cases)) < cfr
    k = fails.astype(np.int64) @ member.T
    lower, upper = cp_bounds(k, np.broadcast_to(n, k.shape), policy.confidence)
    enough = n >= policy.min_control_passes
    slice_fail = enough & (lower > tau)
    slice_pass = enough & (upper <= tau)
    arm_fail = slice_fail.any(axis=1)
    arm_pass = ~arm_fail & np.where(gated, slice_pass, True).all(axis=1)
    return {"fails": float(arm_fail.mean()), "passes": float(arm_pass.mean())}


def pm(rate: float, runs: int) -> str:
    return f"{100 * rate:.2f}% ± {100 * np.sqrt(rate * (1 - rate) / runs):.2f}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 2_000 if args.quick else 10_000
    load_before = common.load_average()
    policy = load_policy(None)
    rows, data = [], {}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        cases = {
            "ruler (150)": (scaled_suite(tmp, "ruler"), "independent"),
            "ruler ×10 (1,500)": (scaled_suite(tmp, "ruler", 10), "independent"),
            "reuse (64 in 16 groups), whole-group defects": (scaled_suite(tmp, "reuse"), "cluster"),
        }
        for label, (path, defects) in cases.items():
            cases_read = read_workload_cases(str(path))
            structure = gate_structure(cases_read, policy)
            op = operating(structure, policy, runs=runs, seed=0, scenario=Scenario(defects=defects))
            earlier = gate_structure(cases_read, replace(policy, strata=()))  # buckets were signals then
            before = {
                c: previous_rule(earlier, policy, c, runs, seed=1, defects=defects)
                for c in (policy.tau, policy.tau / 2, 2 * policy.tau)
            }
            now = {"at_tau": op.at_tau, "at_half": op.at_half_tau, "at_2tau": op.at_2tau}
            for name, ff, fa, ff_half, power in (
                ("before", before[policy.tau]["fails"], before[policy.tau]["passes"],
                 before[policy.tau / 2]["fails"], before[2 * policy.tau]["fails"]),
                ("now", op.false_fail, op.false_accept, op.false_fail_half, op.power),
            ):  # fmt: skip
                rows.append([label, len(structure.names), name, pm(ff, runs), pm(fa, runs),
                             pm(ff_half, runs), pm(power, runs)])  # fmt: skip
            data[label] = {
                "slices": len(structure.names),
                "before": before,
                "now": {k: vars(v) for k, v in now.items()},
            }
    md = (
        "## Gate operating characteristics (default policy, arm level)\n\n"
        + common.provenance([sys.executable, *sys.argv], load_before)
        + f"- {runs} simulated runs per point; every case a control pass; no A/A replicate; the policy "
        f"declares α = {policy.alpha:.3g} for false fails and false accepts at CFR = τ = {policy.tau:g}\n"
        "- before: each slice alone at full α, min_control_passes blocking FAIL too, cases independent; "
        "now: `gate.procedure` (exact tails over clusters, ICC bounded from the run; weighted Holm, gated "
        "family with the ctx_bucket strata vs signals; paired A/A)\n\n"
        + common.table(
            [
                "workload",
                "slices",
                "rule",
                "false fail @τ",
                "false accept @τ",
                "false fail @τ/2",
                "power @2τ",
            ],
            rows,
        )
    )
    common.write_section("gate_operating", md, data)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
