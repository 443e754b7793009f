"""`-E matvec=gemv` (opt-in; the default is gemm) against `matvec=gemm` on every shipped treatment the hf
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
from linear_identity import chosen_cases
from option_identity import chosen_treatments, compare

import kvgate  # noqa: F401  (sets OpenMP's passive waits before torch loads)

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

    load = common.load_average()
    cases = chosen_cases(args.suite, n_cases)
    engines = {h: HFEngine(resolve_model(MODEL), threads=1, matvec=h) for h in MATVECS}
    kernels = {"linear": engines["gemm"].linear, "attention": engines["gemm"].attention}  # defaults too
    chosen, tables = chosen_treatments(args.treatments)
    result = compare(engines, MATVECS, chosen, tables, cases)
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
        f"({len(result.data)}; refused: {', '.join(result.refused) or 'none'})\n" + result.summary()
    )
    print(text)
    if not args.no_write:
        record = {"treatments": result.data, "refused": result.refused, **kernels}
        common.write_section(SECTIONS[args.suite], text, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
