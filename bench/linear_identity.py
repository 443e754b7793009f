"""oneDNN's packed projections (`-E linear=onednn`) against torch's (`-E linear=torch`) on every shipped
treatment the hf engine runs: same tokens?

oneDNN is the hf engine's default on CPU float32; this measures how often that changes a shipped arm's
answers against torch's nn.Linear (MKL).
Two hf engines (linear=torch, linear=onednn; one thread each) run every catalog treatment the engine
accepts on the cases of a shipped suite frozen for the embedded model (`--cases N`: N spread evenly;
default every case), one case at a time, and the section lists, per treatment, whether every case's
output tokens are the same, and each engine's CPU seconds for it (process time, the engines alternating
which goes first). `--jobs J` shares the treatments among J processes (each loads both engines).
`--keep FILE` appends each treatment's outcome to FILE as it is measured and skips those FILE already
holds for the same cases (a run stopped, or cut by `--stop-after S` seconds, goes on where it was); the
section says how many of the accepted treatments were compared.

    .venv/bin/python bench/linear_identity.py [--quick] [--suite smoke|ruler] [--cases N] [--jobs J]
        [--keep FILE] [--stop-after S]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import common

import kvgate  # noqa: F401  (sets OpenMP's passive waits before torch loads)

MODEL = "smollm2-135m"
LINEARS = ("torch", "onednn")
SECTIONS = {"smoke": "linear_identity", "ruler": "linear_identity_ruler"}


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


def chosen_cases(suite: str, n_cases: int | None) -> list[Any]:
    """The suite's cases frozen for the model: all, or `n_cases` spread evenly."""
    from workloads import freeze_for_model

    from kvgate.workload.schema import read_workload

    with tempfile.TemporaryDirectory(prefix="kvgate-bench-linear-") as tmp:
        frozen = freeze_for_model(common.REPO_ROOT / "suites" / f"{suite}.toml", Path(tmp) / "w.parquet")
        every = read_workload(frozen).cases
    n = len(every) if n_cases is None else min(n_cases, len(every))
    return [every[int(i * len(every) / n)] for i in range(n)]


def kept(path: Path | None, case_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The outcomes `path` holds for these cases, by treatment."""
    if path is None or not path.exists():
        return {}
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {line["name"]: line["data"] for line in lines if line["case_ids"] == case_ids}


def compare(job: tuple[list[str], list[Any], int, Path | None, float]) -> dict[str, dict[str, Any]]:
    """Both engines on each of `names` (the `offset`-th treatment overall first alternates the order),
    none started after `deadline` (time.time())."""
    names, cases, offset, keep, deadline = job
    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model
    from kvgate.treatments.matrix import catalog_tables, parse_treatment

    engines = {linear: HFEngine(resolve_model(MODEL), threads=1, linear=linear) for linear in LINEARS}
    tables = catalog_tables()
    data = {}
    for index, name in enumerate(names, offset):
        if time.time() > deadline:
            break
        treatment = parse_treatment(name, tables, "catalog")
        order = common.rotated(LINEARS, index)
        outcome = {linear: run_arm(engines[linear], treatment, cases) for linear in order}
        tokens = {linear: outcome[linear][0] for linear in LINEARS}
        pairs = zip(cases, tokens["torch"], tokens["onednn"], strict=True)
        differ = [case.case_id for case, a, b in pairs if a != b]
        cpu = {linear: outcome[linear][1] for linear in LINEARS}
        data[name] = {"same_tokens": not differ, "cases_differ": differ, "cpu_s": cpu}
        print(name, not differ, {k: round(v, 2) for k, v in cpu.items()}, flush=True)
        if keep is not None:
            line = {"name": name, "case_ids": [c.case_id for c in cases], "data": data[name]}
            with keep.open("a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2 cases")
    parser.add_argument("--suite", choices=sorted(SECTIONS), default="smoke", help="shipped suite (smoke)")
    parser.add_argument("--cases", type=int, default=None, help="cases spread evenly (default: every case)")
    parser.add_argument("--jobs", type=int, default=1, help="processes sharing the treatments (default 1)")
    parser.add_argument("--keep", type=Path, default=None, help="append outcomes here; skip those it holds")
    parser.add_argument("--stop-after", type=float, default=None, help="start no treatment after S seconds")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    args = parser.parse_args(argv)
    if args.jobs < 1 or (args.cases is not None and args.cases < 1):
        parser.error("--jobs and --cases must be ≥ 1")
    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model
    from kvgate.treatments.matrix import catalog_tables, parse_treatment

    load = common.load_average()
    cases = chosen_cases(args.suite, 2 if args.quick else args.cases)
    probe = HFEngine(resolve_model(MODEL), threads=1, linear="torch")
    tables = catalog_tables()
    accepted: list[str] = []
    refused: list[str] = []
    for name in tables:
        (refused if probe.refusal(parse_treatment(name, tables, "catalog")) else accepted).append(name)
    del probe
    case_ids = [c.case_id for c in cases]
    before = kept(args.keep, case_ids)
    todo = [name for name in accepted if name not in before]
    deadline = time.time() + (args.stop_after if args.stop_after is not None else float("inf"))
    shares = [(todo[j :: args.jobs], cases, j, args.keep, deadline) for j in range(args.jobs)]
    if args.jobs == 1:
        parts = [compare(shares[0])]
    else:
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            parts = pool.map(compare, shares)
    found = {**before, **{name: d for part in parts for name, d in part.items()}}
    data = {name: found[name] for name in accepted if name in found}
    unrun = [name for name in accepted if name not in found]
    if not data:
        raise SystemExit("no treatment compared: give more time (--stop-after)")
    rows = [
        [name, str(d["same_tokens"]), f"{d['cpu_s']['torch']:.2f}", f"{d['cpu_s']['onednn']:.2f}",
         f"{d['cpu_s']['onednn'] / d['cpu_s']['torch']:.3f}×"]
        for name, d in data.items()
    ]  # fmt: skip
    differ = [n for n, d in data.items() if not d["same_tokens"]]
    ratios = [d["cpu_s"]["onednn"] / d["cpu_s"]["torch"] for d in data.values()]
    lengths = sorted({len(c.prompt_token_ids or ()) for c in cases})
    new_tokens = sorted({c.max_new_tokens for c in cases})
    equal = sum(len(cases) - len(d["cases_differ"]) for d in data.values())
    differing = ", ".join(f"{n} on {len(data[n]['cases_differ'])}" for n in differ)
    text = (
        f"## `-E linear=onednn` against `linear=torch` on every shipped treatment, {args.suite} suite "
        "(hf, cpu, one thread)\n\n"
        + common.provenance([common.PYTHON, __file__, *sys.argv[1:]], load)
        + f"- {len(cases)} {args.suite} cases frozen for {MODEL} (prompt tokens "
        f"{', '.join(map(str, lengths))}; up to {max(new_tokens)} new tokens), one at a time; every catalog "
        f"treatment the hf engine accepts ({len(accepted)}; refused: {', '.join(refused) or 'none'}); "
        f"compared: {len(data)} of {len(accepted)}"
        + (f" (not reached in the time given: {', '.join(unrun)})" if unrun else "")
        + f"; shared among {args.jobs} process(es)\n"
        f"- same output tokens on every treatment: {not differ}"
        + (f" (differ: {differing})" if differ else "")
        + f"; {equal} of {len(data) * len(cases)} generations compared equal; CPU onednn ÷ torch, median "
        f"over treatments: {common.median(ratios):.3f}×\n\n"
        + common.table(["treatment", "same tokens", "torch CPU s", "onednn CPU s", "onednn ÷ torch"], rows)
        + "\n"
    )
    print(text)
    if not args.no_write:
        common.write_section(SECTIONS[args.suite], text, {"treatments": data, "refused": refused,
                                                         "unrun": unrun, "case_ids": case_ids})  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
