"""The gate on the workload shapes a release team cannot choose (docs/gate.md): unequal clusters with
per-case and per-cluster defects, a regression at the longest contexts, a noisy A/A replicate, and the
sequential modes — each through `gate.simulate.operating`, the code `kvgate simulate` runs, under the
shipped default policy (`defects = "estimate"`) beside the declarations a policy may make instead.

    .venv/bin/python bench/gate_shapes.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import common
import numpy as np
from scipy import sparse
from workloads import scaled_suite

from kvgate.gate.policy import Policy, load_policy
from kvgate.gate.procedure import Family
from kvgate.gate.simulate import Operating, Scenario, Structure, operating
from kvgate.report.analysis.gate_structure import gate_structure
from kvgate.report.analysis.run_data import read_workload_cases

SHAPES = {
    "10×20 + 100×1": [(10, 20), (100, 1)],
    "1×60 + 140×1": [(1, 60), (140, 1)],
    "80×1 + 20×4 + 5×16": [(80, 1), (20, 4), (5, 16)],
    "16×4 + 228×1": [(16, 4), (228, 1)],
}


def shape_structure(groups: list[tuple[int, int]], policy: Policy) -> Structure:
    """One slice, `all`, over clusters of the given (count, size) groups."""
    codes = np.repeat(np.arange(sum(c for c, _ in groups)), [s for c, s in groups for _ in range(c)])
    member = sparse.csr_matrix(np.ones((1, codes.size), dtype=np.float32))
    return Structure(member, codes, ["all"], Family(np.array([policy.tau]), np.array([True])), codes)


def pm(rate: float, runs: int) -> str:
    return f"{100 * rate:.2f}% ± {100 * np.sqrt(rate * (1 - rate) / runs):.2f}"


def row(label: str, rule: str, op: Operating, runs: int) -> list[str]:
    rates = (op.false_accept, op.false_fail, op.power, op.at_half_tau.passes, op.at_zero.passes)
    return [label, rule, *(pm(r, runs) for r in rates), f"{op.at_zero.generated:.0f}"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 2_000 if args.quick else 10_000
    load_before = common.load_average()
    default = replace(load_policy(None), min_control_passes=1)
    rows: list[list[str]] = []
    data: dict[str, dict[str, float]] = {}

    def record(label: str, rule: str, op: Operating) -> None:
        rows.append(row(label, rule, op, runs))
        data[f"{label} · {rule}"] = {
            "false_accept": op.false_accept, "false_fail": op.false_fail, "power": op.power,
            "pass_at_zero": op.at_zero.passes, "cases_at_zero": op.at_zero.generated,
            "pass_at_half_tau": op.at_half_tau.passes,
        }  # fmt: skip

    for label, groups in SHAPES.items():
        for defects in ("independent", "cluster"):
            for rule in ("estimate", "per_cluster", "per_case"):
                policy = replace(default, defects=rule)
                op = operating(
                    shape_structure(groups, policy), policy, runs, seed=1, scenario=Scenario(defects)
                )
                record(f"{label}, {'per-case' if defects == 'independent' else 'whole-cluster'} defects",
                       f"defects = {rule}", op)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        ruler = read_workload_cases(str(scaled_suite(tmp, "ruler")))
        ruler_1500 = read_workload_cases(str(scaled_suite(tmp, "ruler", 10)))
        reuse = read_workload_cases(str(scaled_suite(tmp, "reuse")))
        policy = load_policy(None)
        for strata in (policy.strata, ()):
            p = replace(policy, strata=strata)
            op = operating(
                gate_structure(ruler_1500, p), p, runs, seed=5, scenario=Scenario(defects_in="ctx_bucket=4k")
            )
            record(
                "ruler ×10, every defect in ctx_bucket=4k (there 3× the overall CFR)",
                f"strata = {list(strata)}",
                op,
            )
        flat = replace(policy, strata=())
        structure = gate_structure(ruler, flat)
        for aa in (0.05, 0.0):
            op = operating(structure, flat, runs, seed=6, scenario=Scenario(aa_rate=aa, replicate=True))
            record(f"ruler (150), A/A replicate flipping {aa:.0%}", "strata = []", op)
        for level in (0.25, 0.05):
            declared = replace(flat, aa_alpha=level)
            op = operating(structure, declared, runs, seed=6, scenario=Scenario(aa_rate=0.05, replicate=True))
            record("ruler (150), A/A replicate flipping 5%", f"strata = [], aa_alpha = {level:g}", op)
        for defects in ("independent", "cluster"):
            op = operating(gate_structure(reuse, flat), flat, runs, seed=7, scenario=Scenario(defects))
            record(f"reuse (16 groups of 4), {defects} defects", "strata = []", op)
        anytime = replace(flat, sequential=True, anytime=True, look_every=10)
        for rule, p in (
            ("sequential = true, look_every = 100", replace(flat, sequential=True, look_every=100)),
            ('sequential = "anytime", look_every = 10', anytime),
        ):
            op = operating(gate_structure(ruler_1500, p), p, runs, seed=8)
            record("ruler ×10 (1,500)", rule, op)
    md = (
        "## Gate on unequal clusters, strata, A/A and sequential modes (arm level)\n\n"
        + common.provenance([sys.executable, *sys.argv], load_before)
        + f"- {runs} simulated runs per point; every case a control pass; τ = 5%, α = 5% each way; the "
        "cluster shapes are one slice (`all`) with min_control_passes = 1; the suites use the shipped "
        "policy\n"
        "- false accept: PASS at CFR = τ; false fail: FAIL at CFR = τ; power: FAIL at 2τ; cases: mean "
        "generated before the verdict at CFR 0; with every defect in ctx_bucket=4k the overall CFR is the "
        "point's and 4k's is 3× it, so a FAIL at τ is right and a PASS at τ/2 (4k at 1.5τ) is the error\n\n"
        + common.table(
            [
                "workload",
                "rule",
                "false accept @τ",
                "false fail @τ",
                "power @2τ",
                "PASS @τ/2",
                "PASS @0",
                "cases @0",
            ],
            rows,
        )
    )
    common.write_section("gate_shapes", md, data)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
