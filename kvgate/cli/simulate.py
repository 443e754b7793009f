"""`kvgate simulate`: the arm-level error rates of a policy, by simulating the whole gate procedure on a
workload's slice structure (or on one slice of n cases)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import click

from kvgate.cli.options import PATH
from kvgate.seeds import MAX_SEED

DEFAULT_N = (24, 60, 100, 300, 1000)
MAX_RUNS = 1_000_000
MAX_N = 1_000_000
"""Largest --n: one slice of a million control passes takes ≈ 12 s and 450 MiB at --runs 20 (ten
million took over a minute and more than 1 GiB: the battery's hang)."""
MAX_CELLS = 2 * 10**9
"""Simulated runs × cases: the work one call may ask for."""


@click.command()
@click.option("--policy", type=PATH, default=None, help="Gate policy TOML (default: shipped).")
@click.option(
    "-w", "--workload", type=PATH, default=None,
    help="Frozen workload: simulate on its slices, critical cases and clusters.",
)  # fmt: skip
@click.option(
    "--n", "ns", type=int, multiple=True,
    help="Without -w: one slice of n control passes (repeatable). [default: 24 60 100 300 1000]",
)  # fmt: skip
@click.option("--runs", type=int, default=10_000, show_default=True, help="Simulated runs per point.")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=0, show_default=True)
@click.option(
    "--defects", type=click.Choice(["independent", "cluster"]), default="independent", show_default=True,
    help="Candidate failures per case, or per cluster (a defect fails the whole prefix group).",
)  # fmt: skip
@click.option(
    "--control-pass-rate", type=float, default=1.0, show_default=True,
    help="Each case's chance that the control passes it.",
)  # fmt: skip
@click.option(
    "--aa-rate", type=float, default=None,
    help="Each control pass's chance that the A/A replicate fails it (0: a replicate that never flips). "
    "[default: no replicate]",
)  # fmt: skip
@click.option(
    "--defects-in", "defects_in", default=None, metavar="SLICE",
    help="Put every defect in this slice (e.g. ctx_bucket=4k), at the rate giving each point's overall CFR.",
)  # fmt: skip
@click.option(
    "--sequential", is_flag=True,
    help="Compare the fixed-n gate and the sequential one (the policy's look_every, spending_power).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def simulate(
    policy: Path | None,
    workload: Path | None,
    ns: tuple[int, ...],
    runs: int,
    seed: int,
    defects: str,
    control_pass_rate: float,
    aa_rate: float | None,
    defects_in: str | None,
    sequential: bool,
    as_json: bool,
) -> None:
    """Simulate the gate: how often an arm passes or fails at CFR = τ, fails at τ/2, and fails at 2τ."""
    from kvgate.errors import BadInput
    from kvgate.gate.policy import load_policy
    from kvgate.gate.simulate import Scenario, Structure, operating

    gate = load_policy(policy)
    if not 1 <= runs <= MAX_RUNS:
        raise BadInput(f"--runs must be in [1, {MAX_RUNS}], got {runs}")
    if not 0 < control_pass_rate <= 1 or (aa_rate is not None and not 0 <= aa_rate <= 1):
        raise BadInput("--control-pass-rate must be in (0, 1] and --aa-rate in [0, 1]")
    if workload is not None and ns:
        raise BadInput("give either -w WORKLOAD or --n, not both")
    structures: list[tuple[str, Structure]]
    if workload is not None:
        from kvgate.cli.run_as_workload import refuse_run_as_workload
        from kvgate.gate.policy_slices import check_policy_columns
        from kvgate.report.analysis.gate_structure import gate_structure
        from kvgate.report.analysis.run_data import read_workload_cases

        refuse_run_as_workload(workload, "-w")
        cases = read_workload_cases(str(workload))
        if cases.n == 0:
            raise BadInput(f"workload {workload} has no cases")
        check_policy_columns(gate, cases.slice_columns, f"workload {workload}")  # as `kvgate run` does
        structures = [(workload.name, gate_structure(cases, gate))]
    else:
        ns = ns or DEFAULT_N
        if any(not 1 <= n <= MAX_N for n in ns):
            raise BadInput(f"--n must be in [1, {MAX_N}], got {min(ns) if min(ns) < 1 else max(ns)}")
        structures = [(f"n={n}", Structure.single(n, gate)) for n in ns]
    for _, s in structures:
        if runs * s.n_cases > MAX_CELLS:
            raise BadInput(f"--runs × cases must be ≤ {MAX_CELLS:.0e}; got {runs} × {s.n_cases}")
    if defects_in is not None:
        from kvgate.gate.policy import slice_terms

        slice_terms(defects_in)
        missing = [label for label, s in structures if defects_in not in s.names]
        if missing:
            raise BadInput(f"--defects-in {defects_in!r} is not a slice of {missing[0]}; give a slice it has")
    scenario = Scenario(
        defects, control_pass_rate, aa_rate or 0.0, replicate=aa_rate is not None, defects_in=defects_in
    )
    looks = "anytime" if gate.anytime else "sequential"
    rules = [
        ("fixed-n", replace(gate, sequential=False, anytime=False)),
        (looks, replace(gate, sequential=True)),
    ]
    if not sequential:
        rules = [(looks if gate.sequential else "fixed-n", gate)]
    results = [
        (label, rule, s, operating(s, policy, runs, seed, scenario))
        for label, s in structures
        for rule, policy in rules
    ]
    if as_json:
        click.echo(json.dumps(_json(gate, runs, seed, scenario, results), indent=2, sort_keys=True))
        return
    _table(gate, runs, seed, scenario, results)


def _json(gate: Any, runs: int, seed: int, scenario: Any, results: list[Any]) -> dict[str, Any]:
    points = []
    for label, rule, s, r in results:
        points.append({
            "structure": label,
            "rule": rule,
            "cases": s.n_cases,
            "slices": len(s.names),
            "gated": int(s.family.gated.sum()),
            "at_tau": asdict(r.at_tau),
            "at_half_tau": asdict(r.at_half_tau),
            "at_2tau": asdict(r.at_2tau),
            "at_zero": asdict(r.at_zero),
            "at_4tau": asdict(r.at_4tau),
            **{
                name: {"rate": value, "mc_se": r.standard_error(value)}
                for name, value in (
                    ("false_accept", r.false_accept), ("false_fail", r.false_fail),
                    ("false_fail_half_tau", r.false_fail_half), ("power", r.power),
                )
            },
        })  # fmt: skip
    return {
        "policy": {"tau": gate.tau, "confidence": gate.confidence, "rule": gate.rule,
                   "min_control_passes": gate.min_control_passes, "signal_alpha": gate.signal_alpha,
                   "defects": gate.defects, "strata": list(gate.strata), "aa_alpha": gate.aa_alpha,
                   "sequential": gate.sequential, "look_every": gate.look_every,
                   "spending_power": gate.spending_power, "sha256": gate.sha256},
        "runs": runs,
        "seed": seed,
        "scenario": asdict(scenario),
        "points": points,
    }  # fmt: skip


def _table(gate: Any, runs: int, seed: int, scenario: Any, results: list[Any]) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    # Plain text: `strata=[ctx_bucket]` and a workload's file name are no markup.
    console = Console(width=120, markup=False, highlight=False)
    console.print(
        f"gate τ={gate.tau:g} rule={gate.rule} confidence={gate.confidence:g} "
        f"min_control_passes={gate.min_control_passes} signal_alpha={gate.signal_alpha:g} "
        f"defects={gate.defects} strata=[{', '.join(gate.strata)}] aa_alpha={gate.aa_alpha:g} "
        f"look_every={gate.look_every} spending_power={gate.spending_power:g} · "
        f"{runs} simulated runs per point, seed {seed}, {scenario.defects} defects, "
        f"control pass rate {scenario.control_pass_rate:g}, "
        + (f"A/A rate {scenario.aa_rate:g}" if scenario.has_replicate else "no A/A replicate")
        + (f", every defect in {scenario.defects_in}" if scenario.defects_in else "")
    )
    table = Table(box=box.SIMPLE_HEAD)
    for header in ("structure", "rule", "cases", "slices (gated)", "false accept @τ", "false fail @τ",
                   "false fail @τ/2", "power @2τ", "cases run @0/τ/2τ/4τ"):  # fmt: skip
        table.add_column(header, justify="right", overflow="fold")
    for label, rule, s, r in results:
        cells = [f"{v:.2%} ± {r.standard_error(v):.2%}" for v in (r.false_accept, r.false_fail,
                 r.false_fail_half, r.power)]  # fmt: skip
        run = "/".join(f"{p.generated:.0f}" for p in (r.at_zero, r.at_tau, r.at_2tau, r.at_4tau))
        table.add_row(
            label, rule, str(s.n_cases), f"{len(s.names)} ({int(s.family.gated.sum())})", *cells, run
        )
    console.print(table)
    console.print(
        f"arm-level shares of simulated runs; the policy promises false accept and false fail at CFR = τ "
        f"≤ α = {gate.alpha:.3g} · power: runs that fail an arm at 2τ · ± one Monte Carlo standard error · "
        "cases run: mean cases an arm generates before its verdict at CFR 0, τ, 2τ and 4τ"
    )
