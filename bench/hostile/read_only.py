"""Folders kvgate cannot write: a read-only bind mount (needs root) holding a run, a partial run, a
workload and empty folders, as outputs, working folder, `TMPDIR`, `HOME`, `KVGATE_RUNS` and
`KVGATE_CACHE`."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from hostile.case import ANY, REFUSED, Arg, Case, run_argv


def read_only_mount(base: Path, work: Path) -> Path | None:
    """A read-only bind mount holding a complete run, a partial one and a workload (None without root)."""
    ro = work / "ro"
    (ro / "empty").mkdir(parents=True)
    shutil.copytree(base / "run", ro / "run")
    shutil.copytree(base / "run", ro / "partial")
    shutil.rmtree(ro / "partial" / "results")
    shutil.copy(base / "w.parquet", ro / "w.parquet")
    mounted = subprocess.run(["mount", "--bind", str(ro), str(ro)], capture_output=True).returncode == 0
    if (
        mounted
        and subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], capture_output=True).returncode == 0
    ):
        return ro
    if mounted:
        subprocess.run(["umount", str(ro)])
    return None


def readonly_class(base: Path, ro: Path | None) -> Iterator[Case]:
    """Folders kvgate cannot write: a read-only bind mount holding a run, a workload and empty folders."""
    if ro is None:
        return
    ro_run = run_argv(base, out=None)
    cases: dict[str, tuple[list[Arg], set[int], dict[str, str]]] = {
        "run -o ro": ([*ro_run, "-o", f"{ro}/runs"], REFUSED, {}),
        "run -o ro/new/deeper": ([*ro_run, "-o", f"{ro}/new/deeper"], REFUSED, {}),
        "run --run-dir ro/empty": ([*ro_run, "--run-dir", f"{ro}/empty"], REFUSED, {}),
        "run --run-dir ro/new": ([*ro_run, "--run-dir", f"{ro}/new"], REFUSED, {}),
        "run --resume ro/run": (["run", "--resume", f"{ro}/run", "--quiet"], {0, 1, 2, 3}, {}),
        "run --resume ro/partial": (["run", "--resume", f"{ro}/partial", "--quiet"], REFUSED, {}),
        "report ro/run": (["report", f"{ro}/run"], {0, 1, 3}, {}),
        "report ro/run -o ro": (["report", f"{ro}/run", "-o", f"{ro}/r.md", "--format", "md"], REFUSED, {}),
        "report ro/run --samples ro": (["report", f"{ro}/run", "--samples", f"{ro}/s.jsonl"], REFUSED, {}),
        "report ro/run multi -o ro": (
            ["report", f"{ro}/run", "--format", "md,json", "-o", f"{ro}/dir"],
            REFUSED,
            {},
        ),
        "view ro/run": (["view", f"{ro}/run", "--no-open"], REFUSED, {}),
        "freeze -o ro": (["freeze", str(base / "suite.toml"), "-o", f"{ro}/w.parquet"], REFUSED, {}),
        "init -o ro": (["init", str(base / "trace.jsonl"), "-o", f"{ro}/gate"], REFUSED, {}),
        "run with TMPDIR ro": ([*ro_run, "-o", "{root}/runs"], ANY, {"TMPDIR": str(ro)}),
        "run with HOME ro": (
            [*ro_run, "-o", "{root}/runs"],
            ANY,
            {"HOME": str(ro), "XDG_CACHE_HOME": str(ro)},
        ),
        "run with KVGATE_RUNS ro": (ro_run, REFUSED, {"KVGATE_RUNS": f"{ro}/runs"}),
        "run with KVGATE_CACHE ro": (
            [*ro_run, "-o", "{root}/runs"],
            ANY,
            {"KVGATE_CACHE": f"{ro}/cache"},
        ),
        "report ro/run with TMPDIR ro": (
            ["report", f"{ro}/run", "-o", "{root}/out/r.txt"],  # the table's suffix (r.md needs --format md)
            {0, 1, 3},
            {"TMPDIR": str(ro)},
        ),
        "simulate with TMPDIR ro": (["simulate", "--runs", "20", "--n", "24"], {0}, {"TMPDIR": str(ro)}),
        "freeze --check ro/w": (["freeze", "--check", f"{ro}/w.parquet"], {0}, {}),
    }
    for name, (argv, expect, env) in cases.items():
        variants: dict[str, list[Arg]] = {"": []}
        if argv[0] in ("run", "report"):
            variants[" (json)"] = ["--json"] if argv[0] == "run" else ["--format", "json"]
        for label, extra in variants.items():
            yield Case(
                "readonly",
                name + label,
                [a for a in argv if a != "--quiet" or not extra] + extra,
                [],
                expect,
                env,
            )
        yield Case("readonly", name + " (cwd ro)", argv, [], expect, {**env, "_CWD": str(ro)})
