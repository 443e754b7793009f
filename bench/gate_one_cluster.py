"""20 requests behind one shared system prompt: what the gate can learn from them as one prefix group (a
lone cluster), under the default `defects = "estimate"` beside a declared `per_case` (the same decisions
as `cluster = "none"`), with per-case and whole-cluster defects; and as 20 clusters of one, which trace
import makes of them when the shared prompt is under `prefix_min_share` of their prompts (docs/gate.md,
"What counts as a cluster").

    .venv/bin/python bench/gate_one_cluster.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import common
from gate_shapes import pm, shape_structure

from kvgate.gate.policy import load_policy
from kvgate.gate.simulate import Scenario, operating


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    runs = 2_000 if parser.parse_args().quick else 10_000
    load_before = common.load_average()
    base = replace(load_policy(None), min_control_passes=1)
    rows, data = [], {}
    for rule in ("estimate", "per_case"):
        policy = replace(base, defects=rule)
        for defects in ("independent", "cluster"):
            op = operating(
                shape_structure([(1, 20)], policy), policy, runs, seed=1, scenario=Scenario(defects)
            )
            rates = (op.false_accept, op.false_fail, op.power, op.at_4tau.fails, op.at_zero.passes)
            label = "per-case" if defects == "independent" else "whole-cluster"
            rows.append([f"1×20, {label} defects", f"defects = {rule}", *(pm(r, runs) for r in rates)])
            data[f"{label} · {rule}"] = dict(
                zip(("false_accept", "false_fail", "power", "power_4tau", "pass_at_zero"), rates, strict=True)
            )
    op = operating(shape_structure([(20, 1)], base), base, runs, seed=1, scenario=Scenario("independent"))
    rates = (op.false_accept, op.false_fail, op.power, op.at_4tau.fails, op.at_zero.passes)
    rows.append(
        [
            "20×1 (under prefix_min_share), per-case defects",
            "defects = estimate",
            *(pm(r, runs) for r in rates),
        ]
    )
    data["20x1 per-case · estimate"] = dict(
        zip(("false_accept", "false_fail", "power", "power_4tau", "pass_at_zero"), rates, strict=True)
    )
    md = (
        "## Gate on one cluster of 20 (a trace behind one system prompt)\n\n"
        + common.provenance([sys.executable, *sys.argv], load_before)
        + f"- {runs} simulated runs per point; one slice (`all`) of 20 cases, in one cluster (1×20) or each "
        "its own (20×1, what trace import makes of a shared prefix under `prefix_min_share`); τ = α = 5%; "
        'min_control_passes = 1; `per_case` decides as `cluster = "none"` would\n\n'
        + common.table(
            ["workload", "rule", "false accept @τ", "false fail @τ", "power @2τ", "power @4τ", "PASS @0"],
            rows,
        )
        + "\nA lone cluster cannot tell per-case from whole-cluster defects, so under `estimate` it never "
        "decides; counted as 20 clusters the requests decide as 20 independent cases, which false-fails "
        "as `per_case` does when the shared prompt's defects are whole-cluster after all; 20 independent "
        "cases cannot pass at τ = 5% either (a PASS needs 59).\n"
    )
    common.write_section("gate_one_cluster", md, data)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
