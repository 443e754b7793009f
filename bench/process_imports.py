"""Which heavy packages each kind of kvgate process imports, and which module pulled each one in.

Each kind is its real command line, run once in a fresh process under `python -X importtime`, with one
hook: when the process ends (at exit, or at `os._exit`) it notes which of HEAVY are in sys.modules (a
module marked absent, `sys.modules[name] = None`, is not imported) and which scipy subpackages. The
kinds: `kvgate --help`; `kvgate freeze` (smoke for smollm2-135m); `kvgate report` of a fake-engine run;
`kvgate run` on the fake engine, and on the hf, llamacpp and vllm engines with `--limit 1` (control and
streaming-50; vLLM, which evicts nothing, its `vllm-cpu` matrix). A run ends with its report, so its
process imports what the report needs too. An engine whose libraries are missing is skipped, and said
so. Times are `-X importtime`'s own, summed per package: they show where a start-up goes, not a CPU
benchmark (bench/startup.py and bench/first_generation.py measure those).

    .venv/bin/python bench/process_imports.py [--skip vllm,llamacpp]
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
import tempfile
from pathlib import Path

import common
from first_generation import MATRIX
from startup import import_table

HEAVY = (
    "torch", "transformers", "scipy", "sympy", "triton", "pandas", "numpy", "pyarrow", "vllm", "ray",
    "llama_cpp", "tokenizers", "accelerate", "PIL", "pydantic", "rich",
)  # fmt: skip
NEED_NO_MODEL = ("help", "freeze", "report", "run fake")
"""Kinds that load no model: none may import torch, transformers, sympy or triton."""
MODEL_LIBRARIES = ("torch", "transformers", "sympy", "triton")
MATRICES = {"vllm": "vllm-cpu"}
"""An engine that applies no eviction runs its shipped matrix instead (vLLM: the control, an A/A
replicate and prefix caching)."""
HEADER = ("process", "heavy packages imported", "scipy subpackages", "CPU s (importtime on)", "no model libs")


def child(mark: str, argv: list[str]) -> None:
    """The child: `kvgate ARGV`, noting its imports in the file `mark` when it ends."""

    def note() -> None:
        loaded = [p for p in HEAVY if sys.modules.get(p) is not None]
        scipy = sorted({m.split(".")[1] for m in sys.modules if m.startswith("scipy.") and sys.modules[m]})
        Path(mark).write_text(json.dumps({"loaded": loaded, "scipy": scipy}), encoding="utf-8")

    atexit.register(note)
    exit_now = os._exit

    def noted_exit(code: int) -> None:
        note()
        exit_now(code)

    os._exit = noted_exit  # type: ignore[assignment]
    from kvgate.cli import main

    sys.argv = ["kvgate", *argv]
    main()


def kinds(tmp: Path, skip: set[str]) -> dict[str, list[str] | str]:
    """Each kind's kvgate argv, or why it is skipped."""
    from workloads import freeze_for_model

    from kvgate.engines.registry import ENGINES

    smoke = freeze_for_model(common.REPO_ROOT / "suites" / "smoke.toml", tmp / "smoke.parquet")
    (tmp / "matrix.toml").write_text(MATRIX, encoding="utf-8")
    run = ["run", "-w", str(smoke), "-m", str(tmp / "matrix.toml"), "--quiet", "--verbose"]
    out: dict[str, list[str] | str] = {
        "help": ["--help"],
        "freeze": ["freeze", str(common.REPO_ROOT / "suites" / "smoke.toml"), "-o",
                   str(tmp / "frozen.parquet"), "--model", "smollm2-135m"],
        "run fake": [*run, "--engine", "fake", "-o", str(tmp / "runs-fake")],
        "report": ["report", "RUN", "-o", os.devnull],
    }  # fmt: skip
    for engine in ("hf", "llamacpp", "vllm"):
        missing = ENGINES[engine].missing()
        runs = str(tmp / f"runs-{engine}")
        why = "--skip" if engine in skip else "missing " + ", ".join(missing)
        if engine in skip or missing:
            out[f"run {engine}"] = f"skipped: {why}"
        else:
            matrix = ["-m", MATRICES[engine]] if engine in MATRICES else []
            out[f"run {engine}"] = [*run, *matrix, "--engine", engine, "--limit", "1", "-o", runs]
    return out


def profile(name: str, argv: list[str], tmp: Path) -> dict | str:
    mark = tmp / f"{name.replace(' ', '-')}.imports"
    cmd = [common.PYTHON, "-X", "importtime", str(Path(__file__).resolve()), "--child", str(mark), *argv]
    run = common.run_child(cmd, 900)
    if run.returncode not in (0, 1, 3) or not mark.exists():
        timed_out = " after 900 s" if run.timed_out else ""
        return f"failed: exit {run.returncode}{timed_out}"
    noted = json.loads(mark.read_text(encoding="utf-8"))
    return {**noted, "cpu_s": run.cpu_s, "table": import_table(run.stderr, top=8)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child(argv[1], argv[2:])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--skip", default="", help="engines not to run, comma-separated")
    args = parser.parse_args(argv)
    load = common.load_average()
    results: dict[str, dict | str] = {}
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-imports-") as name:
        tmp = Path(name)
        for kind, cmd in kinds(tmp, set(filter(None, args.skip.split(",")))).items():
            if isinstance(cmd, str):
                results[kind] = cmd
                continue
            if kind == "report":
                (run_dir,) = (tmp / "runs-fake").glob("*/manifest.json")
                cmd = [str(run_dir.parent) if a == "RUN" else a for a in cmd]
            print(f"{kind}: {common.command_line(cmd)}", flush=True)
            results[kind] = profile(kind, cmd, tmp)
    text = section(results, load, argv)
    print(text)
    kept = ("loaded", "scipy", "cpu_s")
    data = {k: v if isinstance(v, str) else {x: v[x] for x in kept} for k, v in results.items()}
    common.write_section("process_imports", text, data)
    return 0


def section(results: dict[str, dict | str], load: str, argv: list[str]) -> str:
    rows, tables = [], ""
    for kind, got in results.items():
        if isinstance(got, str):
            rows.append([kind, got, "", "", ""])
            continue
        heavy = [p for p in got["loaded"] if p in MODEL_LIBRARIES]
        ok = not heavy if kind in NEED_NO_MODEL else None
        rows.append([
            kind, " ".join(f"`{p}`" for p in got["loaded"]) or "none", ", ".join(got["scipy"]) or "",
            f"{got['cpu_s']:.2f}", common.verdict(ok) if ok is not None else "(loads a model)",
        ])  # fmt: skip
        tables += f"\n`{kind}`: {got['table']}\n"
    return (
        "## Heavy imports of each kind of kvgate process\n\n"
        + common.provenance([common.PYTHON, __file__, *argv], load)
        + "- one fresh process per kind under `python -X importtime`; packages noted in sys.modules as it "
        "ends; the runs: smoke frozen for smollm2-135m, control and streaming-50, model engines `--limit 1`\n"
        f"- a kind that loads no model imports none of {', '.join(MODEL_LIBRARIES)}\n\n"
        + common.table(HEADER, rows)
        + "\n"
        + tables
    )


if __name__ == "__main__":
    raise SystemExit(main())
