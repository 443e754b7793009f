"""A hostile battery: thousands of generated hostile inputs, each `kvgate …` in a child process, checked
for the promises bad input must keep (docs/reference.md: its opening and "Exit codes").

Cases are combinations — input class × mutation × command — not hand-written: the CLI's options × hostile
values; policies, matrices and suites × raw mutations (encodings, depth, size, garbage) and field
mutations; workloads × byte corruptions and forged columns; run directories × damage to the index,
manifest, parts and links; special files (named pipes, links to devices, loops) and non-UTF-8 paths for
every input; read-only folders (a read-only bind mount); version skew; a misbehaving OpenAI-compatible
server on loopback; secrets in endpoint URLs. One class is hand-written: what a new user plausibly types
wrong, each once run on or misleadingly answered (`hostile/new_user.py`), that only exit 2 may answer.

Each case runs in a fresh sandbox folder, under a 60 s cap, in a child process forked from a "zygote"
that has the tree's kvgate imported (so a case costs a fraction of kvgate's start-up) and reports the
child's peak RSS from wait4 (the ≈ 150 MiB of imports it was forked with included). A case deviates
when: it exits 70; "Traceback" is in its output; it hangs (killed at the cap); its peak RSS is over
1 GiB without a refusal (exit 2 or 4); a file outside its run directory or declared outputs changes
(the sandbox is snapshot before and after, links not followed; a link's target outside the run is a
sentinel folder; devices are the sandbox's own nodes, never /dev's); the secret appears in anything it
printed or wrote; or its exit code is not one the case's input allows (exit 2 for input that is bad).

    python bench/hostile_battery.py --tree /path/to/kvgate/checkout --label after [--classes cli,...]
        [--sample N] [--jobs 2] [--json out.json]

Inputs are made first by that tree (`bench/hostile_inputs.py`); the summary is printed as a table and
written as JSON. Needs root for the read-only cases (a bind mount); without it they are skipped.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hostile.case import Case, Outcome
from hostile.cli_options import cli_class
from hostile.new_user import new_user_class
from hostile.read_only import read_only_mount, readonly_class
from hostile.run_dirs import rundir_class
from hostile.secret_urls import secret_class
from hostile.served import server_class
from hostile.servers import make_servers
from hostile.sizes import size_class
from hostile.spec_files import file_classes
from hostile.summary import render, summarise
from hostile.versions import version_class
from hostile.workload_files import workload_class
from hostile.zygote import Zygote, run_case

BENCH = Path(__file__).resolve().parent


def all_cases(base: Path, ro: Path | None, servers: dict[str, str]) -> list[Case]:
    cases = [
        *cli_class(base),
        *file_classes(base),
        *workload_class(base),
        *rundir_class(base),
        *version_class(base),
        *readonly_class(base, ro),
        *server_class(base, servers),
        *secret_class(base, servers),
        *size_class(base),
        *new_user_class(base),
    ]
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True, help="the kvgate checkout under test")
    parser.add_argument("--label", default="battery")
    parser.add_argument("--classes", default="", help="comma-separated classes (default: all)")
    parser.add_argument("--match", default="", help="only cases whose name holds this")
    parser.add_argument("--sample", type=int, default=0, help="a seeded sample of this many cases")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--count", action="store_true", help="print the cases per class and stop")
    args = parser.parse_args()
    os.nice(10)
    tree = args.tree.resolve()
    work = Path(tempfile.mkdtemp(prefix=f"hostile-{args.label}-"))
    base = work / "base"
    env = {**os.environ, "PYTHONPATH": str(tree), "KVGATE_CACHE": str(work / "cache")}
    subprocess.run(
        [sys.executable, str(BENCH / "hostile_inputs.py"), str(base)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    servers, stubs = make_servers()
    ro = None if args.count else read_only_mount(base, work)
    if ro is not None:
        atexit.register(subprocess.run, ["umount", "-l", str(ro)], check=False)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that atexit unmounts it
    cases = all_cases(base, ro if not args.count else Path("/ro"), servers)
    if args.classes:
        cases = [c for c in cases if c.cls in args.classes.split(",")]
    if args.match:
        cases = [c for c in cases if args.match in c.name]
    if args.sample and args.sample < len(cases):
        cases = random.Random(29).sample(cases, args.sample)
    print(f"{len(cases)} cases: {dict(Counter(c.cls for c in cases))}", flush=True)
    if args.count:
        shutil.rmtree(work)
        return
    outcomes: list[Outcome] = []
    started = time.monotonic()

    zygotes = [Zygote(tree) for _ in range(args.jobs)]
    free: list[Zygote] = list(zygotes)
    free_lock = threading.Lock()

    def one(item: tuple[int, Case]) -> Outcome:
        i, case = item
        root = work / "cases" / f"{i:05d}"
        with free_lock:
            zygote = free.pop()
        try:
            outcome = run_case(case, root, tree, zygote, work / "cases" / f"{i:05d}.log")
        finally:
            with free_lock:
                free.append(zygote)
        if not outcome.deviations():
            shutil.rmtree(root, ignore_errors=True)
            (work / "cases" / f"{i:05d}.log").unlink()
        return outcome

    (work / "cases").mkdir()
    with ThreadPoolExecutor(args.jobs) as pool:
        for n, outcome in enumerate(pool.map(one, enumerate(cases)), 1):
            outcomes.append(outcome)
            if outcome.deviations():
                print(
                    f"  DEVIATION {outcome.case.cls}: {outcome.case.name}: {outcome.code} "
                    f"{outcome.deviations()} {outcome.output.strip()[-200:]!r}",
                    flush=True,
                )
            if n % 100 == 0:
                print(f"{n}/{len(cases)} in {time.monotonic() - started:.0f} s", flush=True)
    for zygote in zygotes:
        zygote.stop()
    for stub in stubs:
        stub.stop()
    summary = summarise(outcomes)
    summary |= {
        "label": args.label,
        "tree": str(tree),
        "cases": len(outcomes),
        "work": str(work),
        "wall_s": round(time.monotonic() - started),
        "argv": sys.argv,
    }
    print(render(summary, args.label))
    print(f"{len(summary['deviating'])} deviating cases; {summary['wall_s']} s; kept in {work}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
