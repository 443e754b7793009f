"""Generations the sequential gate saves: `ruler` with ten times the cases per cell (1,500) on the fake
engine, the same matrix under the fixed-n policy and under `sequential = true, look_every = 100`, side
by side in one process. Arms: a clean candidate (CFR 0) and one that answers wrongly on 20% of cases
(4τ at the default τ = 5%), beside the control and its A/A replicate.

    .venv/bin/python bench/sequential_fake.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import common
import pyarrow.parquet as pq
from workloads import scaled_suite

MATRIX = """[matrix]
control = "full"
candidates = ["streaming-50", "fp8-e4m3"]
aa_replicate = true
[faults.fp8-e4m3]
wrong_answer_rate = 0.2
"""


def rows_per_arm(run_dir: Path) -> dict[str, int]:
    return {
        arm.name: sum(pq.ParquetFile(p).metadata.num_rows for p in arm.glob("part-*.parquet"))
        for arm in sorted((run_dir / "results").iterdir())
        if arm.is_dir()
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    load_before = common.load_average()
    rows, data = [], {}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        workload = scaled_suite(tmp, "ruler", 2 if args.quick else 10)
        matrix = tmp / "matrix.toml"
        matrix.write_text(MATRIX)
        policies = {"fixed-n": "", "sequential": "sequential = true\nlook_every = 100\n"}
        for name, text in policies.items():
            policy = tmp / f"{name}.toml"
            policy.write_text(text)
            out = tmp / name
            argv = [common.KVGATE, "run", "--engine", "fake", "-w", str(workload), "-m", str(matrix)]
            argv += ["--policy", str(policy), "-o", str(out), "--quiet"]
            child = common.run_child(argv, 1800)
            (run_dir,) = [p.parent for p in out.glob("*/manifest.json")]
            report = common.run_child([common.KVGATE, "report", str(run_dir), "--format", "json"], 600)
            arms = {a["arm"]: a for a in json.loads(report.stdout)["arms"]}
            generated = rows_per_arm(run_dir)
            data[name] = {"wall_s": child.wall_s, "exit": child.returncode, "rows": generated,
                          "decisions": {k: a["decision"] for k, a in arms.items()},
                          "stops": {k: a.get("sequential") for k, a in arms.items()}}  # fmt: skip
            for arm, a in arms.items():
                stop = a.get("sequential")
                where = f"look {stop['look']} of {stop['looks']}" if stop else "—"
                rows.append([name, arm, a["decision"].upper(), generated.get(arm, 0), where])
            rows.append([name, "all arms (control ×2 included)", f"exit {child.returncode}",
                         sum(generated.values()), f"{child.wall_s:.1f} s wall"])  # fmt: skip
    fixed, seq = (sum(data[k]["rows"].values()) for k in ("fixed-n", "sequential"))
    same = data["fixed-n"]["decisions"] == data["sequential"]["decisions"]
    md = (
        "## Sequential gate: generations saved (fake engine)\n\n"
        + common.provenance([sys.executable, *sys.argv], load_before)
        + f"- workload: `ruler` with {'2' if args.quick else '10'}× the cases per cell; streaming-50 clean "
        "(CFR 0), fp8-e4m3 wrong on 20% of cases (4τ); control with an A/A replicate\n"
        f"- generations: {seq} sequential against {fixed} fixed-n "
        f"(**{100 * (1 - seq / fixed):.0f}% fewer**); same verdicts: {same}\n\n"
        + common.table(["policy", "arm", "verdict", "rows generated", "stopped"], rows)
    )
    common.write_section("sequential_fake", md, data)
    print(md)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
