"""`-E matvec=gemv` (the default on CPU float32) against `matvec=gemm` on every shipped treatment the hf
engine runs: same tokens?

gemv computes one-row products on layouts for one row (kvgate/engines/hf/matvec.py): a decode step's
projections on weights packed for one row, the head as x · Wᵀ from a transposed copy; the same products
summed in another order. Two hf engines (matvec=gemm, matvec=gemv; the engine's defaults otherwise, one
thread each) run every catalog
treatment the engine accepts (or those `--treatments` names) on `--cases` cases of a shipped suite spread
evenly (frozen for the embedded model), one case at a time; the section lists, per treatment, whether
every case's output tokens are the same, and each engine's CPU seconds for it (process time, the engines
alternating which goes first).

    .venv/bin/python bench/matvec_identity.py [--quick] [--suite smoke|ruler] [--cases N]
        [--treatments NAME,...]
"""

from __future__ import annotations

import argparse
import sys

import common
from linear_identity import chosen_cases, run_arm

import kvgate.engines.hf  # noqa: F401  (OpenMP's passive waits, set before torch loads)

MODEL = "smollm2-135m"
MATVECS = ("gemm", "gemv")
SECTIONS = {"smoke": "matvec_identity", "ruler": "matvec_identity_ruler"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2 cases")
    parser.add_argument("--suite", choices=sorted(SECTIONS), default="smoke", help="shipped suite (smoke)")
    parser.add_argument("--cases", type=int, default=None, help="cases, spread evenly (default 4)")
    parser.add_argument("--treatments", default=None, help="comma-separated catalog names (default: all)")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args(argv)
    n_cases = args.cases or (2 if args.quick else 4)
    if n_cases < 1:
        parser.error("--cases must be ≥ 1")
    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model
    from kvgate.treatments.matrix import catalog_tables, parse_treatment

    load = common.load_average()
    cases = chosen_cases(args.suite, n_cases)
    engines = {h: HFEngine(resolve_model(MODEL), threads=1, matvec=h) for h in MATVECS}
    kernels = {k: engines["gemm"].fingerprint().get(k) for k in ("linear", "attention")}
    tables = catalog_tables()
    chosen = list(tables) if args.treatments is None else args.treatments.split(",")
    unknown = [n for n in chosen if n not in tables]
    if unknown:
        parser.error(f"--treatments: not in the catalog: {', '.join(unknown)}")
    rows, data, refused = [], {}, []
    for index, name in enumerate(chosen):
        treatment = parse_treatment(name, tables, "catalog")
        if engines["gemm"].refusal(treatment) is not None:
            refused.append(name)
            continue
        order = common.rotated(MATVECS, index)
        outcome = {h: run_arm(engines[h], treatment, cases) for h in order}
        pairs = zip(cases, outcome["gemm"][0], outcome["gemv"][0], strict=True)
        differ = [case.case_id for case, a, b in pairs if a != b]
        cpu = {h: outcome[h][1] for h in MATVECS}
        data[name] = {"same_tokens": not differ, "cases_differ": differ, "cpu_s": cpu}
        rows.append([name, str(not differ), f"{cpu['gemm']:.2f}", f"{cpu['gemv']:.2f}",
                     f"{cpu['gemv'] / cpu['gemm']:.3f}×"])  # fmt: skip
        print(name, not differ, {h: round(c, 2) for h, c in cpu.items()}, flush=True)
    differing = [n for n, d in data.items() if not d["same_tokens"]]
    ratios = [d["cpu_s"]["gemv"] / d["cpu_s"]["gemm"] for d in data.values()]
    lengths = ", ".join(str(len(c.prompt_token_ids or ())) for c in cases)
    which, among = (
        ("every shipped treatment", "every catalog treatment")
        if args.treatments is None
        else ("shipped treatments", "the treatments named that")
    )
    text = (
        f"## `-E matvec=gemv` against `matvec=gemm` on {which}, "
        f"{args.suite} suite (hf, cpu, one thread)\n\n"
        + common.provenance([common.PYTHON, __file__, *sys.argv[1:]], load)
        + f"- {len(cases)} {args.suite} cases frozen for {MODEL} (prompt tokens {lengths}, up to "
        f"{max(c.max_new_tokens for c in cases)} new tokens), one at a time; both engines "
        f"`linear={kernels['linear']}`, `attention={kernels['attention']}`; {among} the hf engine accepts "
        f"({len(data)}; refused: {', '.join(refused) or 'none'})\n"
        f"- same output tokens on every treatment: {not differing}"
        + (f" (differ: {', '.join(differing)})" if differing else "")
        + f"; CPU gemv ÷ gemm, median over treatments: {common.median(ratios):.3f}×\n\n"
        + common.table(["treatment", "same tokens", "gemm CPU s", "gemv CPU s", "gemv ÷ gemm"], rows)
        + "\n"
    )
    print(text)
    if not args.no_write:
        common.write_section(SECTIONS[args.suite], text, {"treatments": data, "refused": refused, **kernels})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
