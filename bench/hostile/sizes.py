"""Sizes: 65 to 100,000 candidates, `--runs`/`--n`/`--limit` up to 10^9, 2,000 `-E` and `--critical`,
10,000 suites."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from hostile.case import ANY, REFUSED, Case, run_argv
from hostile.sandbox import write


def size_class(base: Path) -> Iterator[Case]:
    fake_run = run_argv(base, matrix=None)
    for n in (65, 500, 10_000, 100_000):
        names = ", ".join(f'"q{i}"' for i in range(n))
        for via in ("-m", "--arms"):
            argv = run_argv(base, matrix="{root}/in/m.toml")
            if via == "--arms":
                argv += ["--arms", ",".join(f"q{i}" for i in range(min(n, 2000)))]
            data = f'[matrix]\ncontrol = "full"\ncandidates = [{names}]\n'.encode()
            yield Case("size", f"{n} candidates via {via}", argv, [write("m.toml", data)], REFUSED)
    for n in ("1000000000", "10000000", "100000"):
        yield Case(
            "size",
            f"simulate --runs {n}",
            ["simulate", "--n", "24", "--runs", n],
            [],
            REFUSED if len(n) > 9 else ANY,
        )
        yield Case("size", f"simulate --n {n}", ["simulate", "--runs", "20", "--n", n], [], ANY)
        yield Case(
            "size",
            "simulate 40 --n",
            ["simulate", "--runs", "20", *[a for _ in range(40) for a in ["--n", "24"]]][: 3 + 80],
            [],
            ANY,
        )
        yield Case("size", f"run --limit {n}", [*fake_run, "--limit", n], [], ANY)
        yield Case(
            "size",
            f"freeze --limit {n}",
            ["freeze", str(base / "suite.toml"), "--limit", n, "-o", "{root}/out/w.parquet"],
            [],
            ANY,
        )
    many = [a for i in range(2000) for a in ["-E", f"k{i}=1"]]
    yield Case("size", "2000 -E options", [*fake_run, *many], [], REFUSED)
    crit = [a for i in range(2000) for a in ["--critical", f"task=t{i}"]]
    yield Case("size", "2000 --critical", [*fake_run, *crit], [], REFUSED)
    yield Case(
        "size",
        "10000 suites to freeze",
        ["freeze", *[str(base / "suite.toml")] * 10000, "-o", "{root}/out/w.parquet"],
        [],
        ANY,
    )
