"""`kvgate simulate`: the gate's false-accept rate at CFR = τ and power at CFR = 2τ, by simulation."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

DEFAULT_N = (24, 60, 100, 300, 1000)
MAX_RUNS = 10_000_000


@click.command()
@click.option(
    "--policy", type=click.Path(path_type=Path), default=None, help="Gate policy TOML (default: shipped)."
)
@click.option(
    "--n",
    "ns",
    type=int,
    multiple=True,
    help="Control passes in the slice (repeatable). [default: 24 60 100 300 1000]",
)
@click.option("--runs", type=int, default=10_000, show_default=True, help="Simulated runs per point.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def simulate(policy: Path | None, ns: tuple[int, ...], runs: int, seed: int, as_json: bool) -> None:
    """Simulate the gate: how often it passes a candidate at CFR = τ, and fails one at CFR = 2τ."""
    from kvgate.errors import BadInput
    from kvgate.gate.policy import load_policy
    from kvgate.stats.simulate import operating

    gate = load_policy(policy)
    ns = ns or DEFAULT_N
    if any(n < 1 for n in ns):
        raise BadInput(f"--n must be ≥ 1, got {min(ns)}")
    if not 1 <= runs <= MAX_RUNS:
        raise BadInput(f"--runs must be in [1, {MAX_RUNS}], got {runs}")
    results = [operating(n, gate, runs, seed) for n in ns]
    if as_json:
        data = {
            "policy": {"tau": gate.tau, "confidence": gate.confidence, "rule": gate.rule,
                       "min_control_passes": gate.min_control_passes, "sha256": gate.sha256},
            "runs": runs,
            "seed": seed,
            "points": [asdict(r) | {"false_accept": r.false_accept, "power": r.power} for r in results],
        }  # fmt: skip
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console(width=120)
    console.print(
        f"gate τ={gate.tau:g} rule={gate.rule} confidence={gate.confidence:g} "
        f"min_control_passes={gate.min_control_passes} · {runs} simulated runs per cell, seed {seed}"
    )
    table = Table(box=box.SIMPLE_HEAD)
    for header in ("n", "false accept @τ", "exact", "power @2τ", "exact", "pass @2τ", "inconclusive @2τ"):
        table.add_column(header, justify="right")
    for r in results:
        table.add_row(
            str(r.n),
            f"{r.false_accept:.2%} ± {r.standard_error(r.false_accept):.2%}",
            f"{r.exact_at_tau.passes:.2%}",
            f"{r.power:.2%} ± {r.standard_error(r.power):.2%}",
            f"{r.exact_at_2tau.fails:.2%}",
            f"{r.at_2tau.passes:.2%}",
            f"{r.at_2tau.inconclusive:.2%}",
        )
    console.print(table)
    console.print(
        "false accept: runs that pass a candidate whose true CFR is τ · power: runs that fail one at 2τ · "
        "± one Monte Carlo standard error · exact: summed over the binomial distribution"
    )
