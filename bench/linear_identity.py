"""`-E linear=onednn` against the default on every shipped treatment the hf engine runs: same tokens?

The condition for making oneDNN's packed projections the default is that no shipped arm's answers change.
Two hf engines (linear=torch, linear=onednn; one thread each) run every catalog treatment the engine
accepts on `--cases` smoke cases spread evenly (frozen for the embedded model), one case at a time, and
the section lists, per treatment, whether every case's output tokens are the same, and each engine's CPU
seconds for it (process time, the engines alternating which goes first).

    .venv/bin/python bench/linear_identity.py [--quick] [--cases N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common

import kvgate.engines.hf  # noqa: F401  (OpenMP's passive waits, set before torch loads)

MODEL = "smollm2-135m"
LINEARS = ("torch", "onednn")


def run_arm(engine: Any, treatment: Any, cases: list[Any]) -> tuple[list[tuple[int, ...]], float]:
    from kvgate.engines.base import ArmSetup

    session = engine.open(ArmSetup(treatment.name, 0, treatment, f"bench:{treatment.name}"))
    start = time.process_time()
    try:
        out = [session.generate([case])[0] for case in cases]
    finally:
        session.close()
    spent = time.process_time() - start
    failed = [g.error for g in out if g.error]
    if failed:
        raise SystemExit(f"{treatment.name}: {failed[0]}")
    return [g.output_token_ids for g in out], spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2 cases")
    parser.add_argument("--cases", type=int, default=None, help="smoke cases, spread evenly (default 4)")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args(argv)
    n_cases = args.cases or (2 if args.quick else 4)
    from workloads import freeze_for_model

    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model
    from kvgate.treatments.matrix import catalog_tables, parse_treatment
    from kvgate.workload.schema import read_workload

    load = common.load_average()
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-linear-") as tmp:
        workload = freeze_for_model(common.REPO_ROOT / "suites" / "smoke.toml", Path(tmp) / "smoke.parquet")
        every = read_workload(workload).cases
    cases = [every[int(i * len(every) / n_cases)] for i in range(n_cases)]
    engines = {linear: HFEngine(resolve_model(MODEL), threads=1, linear=linear) for linear in LINEARS}
    tables = catalog_tables()
    rows, data = [], {}
    refused = []
    for index, name in enumerate(tables):
        treatment = parse_treatment(name, tables, "catalog")
        if engines["torch"].refusal(treatment) is not None:
            refused.append(name)
            continue
        order = LINEARS if index % 2 == 0 else LINEARS[::-1]
        outcome = {linear: run_arm(engines[linear], treatment, cases) for linear in order}
        same = outcome["torch"][0] == outcome["onednn"][0]
        cpu = {linear: outcome[linear][1] for linear in LINEARS}
        data[name] = {"same_tokens": same, "cpu_s": cpu}
        rows.append([name, str(same), f"{cpu['torch']:.2f}", f"{cpu['onednn']:.2f}",
                     f"{cpu['onednn'] / cpu['torch']:.3f}×"])  # fmt: skip
        print(name, same, cpu, flush=True)
    differ = [n for n, d in data.items() if not d["same_tokens"]]
    ratios = [d["cpu_s"]["onednn"] / d["cpu_s"]["torch"] for d in data.values()]
    lengths = ", ".join(str(len(c.prompt_token_ids or ())) for c in cases)
    text = (
        "## `-E linear=onednn` against the default on every shipped treatment (hf, cpu, one thread)\n\n"
        + common.provenance([common.PYTHON, __file__, *sys.argv[1:]], load)
        + f"- {len(cases)} smoke cases frozen for {MODEL} (prompt tokens {lengths}), one at a time; every "
        f"catalog treatment the hf engine accepts ({len(data)}; refused: {', '.join(refused) or 'none'})\n"
        f"- same output tokens on every treatment: {not differ}"
        + (f" (differ: {', '.join(differ)})" if differ else "")
        + f"; CPU onednn ÷ torch, median over treatments: {common.median(ratios):.3f}×\n\n"
        + common.table(["treatment", "same tokens", "torch CPU s", "onednn CPU s", "onednn ÷ torch"], rows)
        + "\n"
    )
    print(text)
    if not args.no_write:
        common.write_section("linear_identity", text, {"treatments": data, "refused": refused})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
