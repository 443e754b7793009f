"""Two hf engines that differ in one engine option, run on the same shipped treatments and cases: do
they give the same tokens, and at what CPU cost? The loop and the section's summary that
bench/attention_identity.py and bench/matvec_identity.py share.

Each treatment runs on both engines one case at a time (bench/linear_identity.run_arm), the engines
alternating which goes first; a treatment the first engine refuses is listed as refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import common
from linear_identity import run_arm


@dataclass
class Comparison:
    """Per treatment (catalog name): same tokens on every case, the cases that differ, each engine's CPU s."""

    values: tuple[str, str]
    data: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: list[list[str]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """The section's line on identity and cost, then its table."""
        a, b = self.values
        differing = [n for n, d in self.data.items() if not d["same_tokens"]]
        ratios = [d["cpu_s"][b] / d["cpu_s"][a] for d in self.data.values()]
        return (
            f"- same output tokens on every treatment: {not differing}"
            + (f" (differ: {', '.join(differing)})" if differing else "")
            + f"; CPU {b} ÷ {a}, median over treatments: {common.median(ratios):.3f}×\n\n"
            + common.table(["treatment", "same tokens", f"{a} CPU s", f"{b} CPU s", f"{b} ÷ {a}"], self.rows)
            + "\n"
        )


def chosen_treatments(names: str | None) -> tuple[list[str], Any]:
    """The catalog names `names` gives (comma-separated; None: every one) and the catalog's tables;
    SystemExit naming those not in the catalog."""
    from kvgate.treatments.matrix import catalog_tables

    tables = catalog_tables()
    chosen = list(tables) if names is None else names.split(",")
    unknown = [n for n in chosen if n not in tables]
    if unknown:
        raise SystemExit(f"--treatments: not in the catalog: {', '.join(unknown)}")
    return chosen, tables


def compare(
    engines: dict[str, Any], values: tuple[str, str], names: list[str], tables: Any, cases: list[Any]
) -> Comparison:
    """Run every treatment `names` on both `engines[values[0]]` and `engines[values[1]]` over `cases`."""
    from kvgate.treatments.matrix import parse_treatment

    a, b = values
    out = Comparison(values)
    for index, name in enumerate(names):
        treatment = parse_treatment(name, tables, "catalog")
        if engines[a].refusal(treatment) is not None:
            out.refused.append(name)
            continue
        outcome = {v: run_arm(engines[v], treatment, cases) for v in common.rotated(values, index)}
        pairs = zip(cases, outcome[a][0], outcome[b][0], strict=True)
        differ = [case.case_id for case, x, y in pairs if x != y]
        cpu = {v: outcome[v][1] for v in values}
        out.data[name] = {"same_tokens": not differ, "cases_differ": differ, "cpu_s": cpu}
        out.rows.append([name, str(not differ), f"{cpu[a]:.2f}", f"{cpu[b]:.2f}", f"{cpu[b] / cpu[a]:.3f}×"])
        print(name, not differ, {v: round(c, 2) for v, c in cpu.items()}, flush=True)
    return out
