"""What a new user plausibly types wrong, each once found to run on (a flag ignored, a file named "-"
written, a run that can never pass) or to say something misleading, and now refused before any work:
exit 2 is the only exit allowed, except a trace saved with a byte-order mark, which is read, and
`--format JSON`, which is json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from hostile.case import REFUSED, Arg, Case, Prep, run_argv
from hostile.sandbox import copy, write

RECORD = {"messages": [{"role": "user", "content": "Code 1?"}], "expected": ["1"]}


def new_user_class(base: Path) -> Iterator[Case]:
    run = copy(base / "run", "run")
    suite = str(base / "suite.toml")
    frozen = str(base / "w.parquet")
    strata = write("strata.toml", b'tau = 0.3\nstrata = ["ctx_buckt"]\n')
    array = write("array.json", json.dumps([RECORD, RECORD]).encode())
    pretty = write("pretty.json", json.dumps(RECORD, indent=2).encode())
    bom = write("bom.jsonl", b"\xef\xbb\xbf" + json.dumps(RECORD).encode() + b"\n")
    report = ["report", "{root}/in/run"]
    cases: list[tuple[str, list[Arg], list[Prep]]] = [
        ("report --policy strata the run lacks",
         [*report, "--policy", "{root}/in/strata.toml", "--policy-changed-reason", "x"], [run, strata]),
        ("freeze --seed -1", ["freeze", suite, "-o", "{root}/out/w.parquet", "--seed", "-1"], []),
        ("freeze --seed 2^32", ["freeze", suite, "-o", "{root}/out/w.parquet", "--seed", str(2**32)], []),
        ("freeze --limit 0", ["freeze", suite, "-o", "{root}/out/w.parquet", "--limit", "0"], []),
        ("report --samples /proc/x", [*report, "--samples", "/proc/kvgate-samples.jsonl"], [run]),
        ("report -o /proc/x", [*report, "-o", "/proc/kvgate-report.txt"], [run]),
        ("run -w RUN/results/index.json", run_argv(base, "-w", "{root}/in/run/results/index.json"), [run]),
        ("run -w RUN", run_argv(base, "-w", "{root}/in/run"), [run]),
        ("freeze --check RUN/manifest.json", ["freeze", "--check", "{root}/in/run/manifest.json"], [run]),
        ("run --tau 0", run_argv(base, "--tau", "0"), []),
        ("report --junit-inconclusive without junit", [*report, "--junit-inconclusive", "skip"], [run]),
        ("init a JSON array", ["init", "{root}/in/array.json", "-o", "{root}/out/gate"], [array]),
        ("init one pretty JSON object", ["init", "{root}/in/pretty.json", "-o", "{root}/out/gate"], [pretty]),
        ("freeze --check with --model", ["freeze", "--check", frozen, "--model", "smollm2-135m"], []),
        ("freeze --check with --limit", ["freeze", "--check", frozen, "--limit", "1"], []),
        ("report -o -", [*report, "-o", "-"], [run]),
        ("report --samples -", [*report, "--samples", "-"], [run]),
        ("run --json --quiet", run_argv(base, "--json"), []),
        ("view --port without --serve",
         ["view", "{root}/in/run", "--no-open", "--port", "8080", "-o", "{root}/out/r.html"], [run]),
        ("run -o FILE", run_argv(base, out=str(base / "small.toml")), []),
        ("run --run-dir FILE", run_argv(base, "--run-dir", str(base / "small.toml")), []),
        ("report --compare itself", [*report, "--compare", "{root}/in/run/."], [run]),
        ("freeze one suite by path and name", ["freeze", suite, suite, "-o", "{root}/out/w.parquet"], []),
        ("report -o report.json without --format", [*report, "-o", "{root}/out/report.json"], [run]),
        ("run -o report.json", run_argv(base, out="{root}/out/report.json"), []),
        ("report --format JSN", [*report, "--format", "JSN"], [run]),
        ("freeze -o a device", ["freeze", suite, "-o", "{root}/devices/null"], []),
        ("simulate -w --policy strata the workload lacks",
         ["simulate", "-w", frozen, "--policy", "{root}/in/strata.toml", "--runs", "10"], [strata]),
    ]  # fmt: skip
    for name, argv, preps in cases:
        yield Case("newuser", name, argv, preps, REFUSED)
    yield Case("newuser", "init a trace with a byte-order mark",
               ["init", "{root}/in/bom.jsonl", "-o", "{root}/out/gate"], [bom], {0})  # fmt: skip
    yield Case("newuser", "report --format JSON", [*report, "--format", "JSON"], [run], {0, 1, 3})
