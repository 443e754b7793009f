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
import tempfile
from dataclasses import replace
from pathlib import Path

import common
from gate_shapes import pm, shape_structure
from workloads import shared_prompt_trace

from kvgate.gate.policy import Policy, load_policy
from kvgate.gate.simulate import Scenario, Structure, operating
from kvgate.report.analysis.gate_structure import gate_structure
from kvgate.report.analysis.run_data import read_workload_cases

KEYS = ("false_accept", "false_fail", "power", "power_4tau", "pass_at_zero")


def frozen_trace(folder: Path, keys: str, policy: Policy) -> Structure:
    """`workloads.shared_prompt_trace` frozen with the suite's `keys`, as the gate structures it under
    `policy`."""
    return gate_structure(read_workload_cases(str(shared_prompt_trace(folder, keys))), policy)


def point(structure: Structure, policy: Policy, runs: int, defects: str) -> tuple[float, ...]:
    op = operating(structure, policy, runs, seed=1, scenario=Scenario(defects))
    return (op.false_accept, op.false_fail, op.power, op.at_4tau.fails, op.at_zero.passes)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    runs = 2_000 if parser.parse_args().quick else 10_000
    load_before = common.load_average()
    base = replace(load_policy(None), min_control_passes=1)
    rows, data = [], {}

    def add(label: str, rule: str, rates: tuple[float, ...]) -> None:
        rows.append([label, rule, *(pm(r, runs) for r in rates)])
        data[f"{label} · {rule}"] = dict(zip(KEYS, rates, strict=True))

    for rule in ("estimate", "per_case"):
        policy = replace(base, defects=rule)
        for defects in ("independent", "cluster"):
            label = "per-case" if defects == "independent" else "whole-cluster"
            add(
                f"1×20, {label} defects",
                f"defects = {rule}",
                point(shape_structure([(1, 20)], policy), policy, runs, defects),
            )
    add(
        "20×1, per-case defects",
        "defects = estimate",
        point(shape_structure([(20, 1)], base), base, runs, "independent"),
    )
    with tempfile.TemporaryDirectory() as folder:
        for keys, label in (
            ("", "default prefix_min_share"),
            ("prefix_min_share = 0\n", "prefix_min_share = 0"),
        ):
            structure = frozen_trace(Path(folder), keys, base)
            clusters = int(structure.clusters.max()) + 1
            noun = "cluster" if clusters == 1 else "clusters"
            add(
                f"frozen trace ({label}: {clusters} {noun}), per-case defects",
                "default policy",
                point(structure, base, runs, "independent"),
            )
    md = (
        "## Gate on 20 requests behind one system prompt (one cluster, or 20)\n\n"
        + common.provenance([sys.executable, *sys.argv], load_before)
        + f"- {runs} simulated runs per point; one slice (`all`) of 20 cases, in one cluster (1×20) or each "
        'its own (20×1); τ = α = 5%; min_control_passes = 1; `per_case` decides as `cluster = "none"` '
        "would; the frozen trace rows: 20 requests of 458 word-tokens whose first 34% are one system prompt, "
        "frozen by `[[trace]]` import and gated on their own slices (all, ctx_bucket, task, turns, "
        "shared_prefix)\n\n"
        + common.table(
            ["workload", "rule", "false accept @τ", "false fail @τ", "power @2τ", "power @4τ", "PASS @0"],
            rows,
        )
        + "\nA lone cluster cannot tell per-case from whole-cluster defects, so under `estimate` it never "
        "decides; counted as 20 clusters (what trace import makes of a shared prefix under "
        "`prefix_min_share`) the requests decide as 20 independent cases, and false-fail as `per_case` "
        "does when the shared prompt's defects are whole-cluster after all; 20 independent cases cannot "
        "pass at τ = 5% either (a PASS needs 59). Every row draws from seed 1, so rows that decide alike "
        "show identical figures.\n"
    )
    common.write_section("gate_one_cluster", md, data)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
