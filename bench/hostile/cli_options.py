"""Every option of every command × hostile values (empty, negative, 10^23, NaN, 100,000 characters, a
newline, bytes that are not UTF-8, a path out of the sandbox, a named pipe, a folder, a link loop, a
dangling link, a device)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path

from hostile.case import ANY, Arg, Case, Prep, run_argv
from hostile.sandbox import copy, special

ARG_VALUES: dict[str, Arg] = {
    "empty": "",
    "space": " ",
    "negative": "-1",
    "zero": "0",
    "huge-int": "99999999999999999999999",
    "billion": "1000000000",
    "nan": "nan",
    "inf": "inf",
    "hex": "0x10",
    "long": "x" * 100_000,
    "newline": "a\nb",
    "rtl": "\u202eevil",
    "not-utf8": b"x\xff\xfe",
    "equals": "=",
    "kv-junk": "a=b=c",
    "star": "*=",
    "dash": "-",
    "traversal": "../outside/sentinel.txt",
    "dev-null": "{root}/devices/null",
    "dev-zero": "{root}/devices/zero",
    "fifo": "{root}/in/fifo",
    "folder": "{root}/in/folder",
    "loop": "{root}/in/loop",
    "dangling": "{root}/in/dangling",
}


def cli_class(base: Path) -> Iterator[Case]:
    """Every option of every command × hostile values."""
    run = copy(base / "run", "run")
    fake_run = run_argv(base)
    options: list[tuple[str, Callable[[Arg], list[Arg]], list[Prep]]] = [
        ("run -w", lambda v: [*fake_run, "-w", v], []),
        ("run -m", lambda v: [*fake_run, "-m", v], []),
        ("run --arms", lambda v: [*fake_run, "--arms", v], []),
        ("run --engine", lambda v: [*fake_run, "--engine", v], []),
        ("run --model", lambda v: [*fake_run, "--model", v], []),
        ("run --policy", lambda v: [*fake_run, "--policy", v], []),
        ("run --tau", lambda v: [*fake_run, "--tau", v], []),
        ("run --critical", lambda v: [*fake_run, "--critical", v], []),
        ("run --policy-unsafe-reason", lambda v: [*fake_run, "--policy-unsafe-reason", v], []),
        ("run -o", lambda v: [*fake_run, "-o", v], []),
        ("run --run-dir", lambda v: [*fake_run, "--run-dir", v], []),
        ("run --resume", lambda v: ["run", "--resume", v, "--quiet"], []),
        (
            "run --resume RUN with",
            lambda v: ["run", "--resume", "{root}/in/run", "--limit", v, "--quiet"],
            [run],
        ),
        ("run --limit", lambda v: [*fake_run, "--limit", v], []),
        ("run -E", lambda v: [*fake_run, "-E", v], []),
        (
            "run -E timeout_s",
            lambda v: [*fake_run, "-E", f"timeout_s={os.fsdecode(v) if isinstance(v, bytes) else v}"],
            [],
        ),
        ("run --endpoint", lambda v: [*fake_run, "--endpoint", v], []),
        ("run --executor", lambda v: [*fake_run, "--executor", v], []),
        ("run --ray-workers", lambda v: [*fake_run, "--executor", "ray", "--ray-workers", v], []),
        ("report RUN_DIR", lambda v: ["report", v], []),
        (
            "report --format",
            lambda v: ["report", "{root}/in/run", "--format", v, "-o", "{root}/out/r"],
            [run],
        ),
        ("report -o", lambda v: ["report", "{root}/in/run", "-o", v], [run]),
        (
            "report --policy",
            lambda v: ["report", "{root}/in/run", "--policy", v, "--policy-changed-reason", "x"],
            [run],
        ),
        (
            "report --policy-changed-reason",
            lambda v: [
                "report",
                "{root}/in/run",
                "--policy",
                str(base / "policy.toml"),
                "--policy-changed-reason",
                v,
            ],
            [run],
        ),
        ("report --compare", lambda v: ["report", "{root}/in/run", "--compare", v], [run]),
        (
            "report --junit-inconclusive",
            lambda v: ["report", "{root}/in/run", "--format", "junit", "--junit-inconclusive", v],
            [run],
        ),
        ("report --samples", lambda v: ["report", "{root}/in/run", "--samples", v], [run]),
        ("freeze SUITE", lambda v: ["freeze", v, "-o", "{root}/out/w.parquet"], []),
        ("freeze -o", lambda v: ["freeze", str(base / "suite.toml"), "-o", v], []),
        (
            "freeze --model",
            lambda v: ["freeze", str(base / "suite.toml"), "-o", "{root}/out/w.parquet", "--model", v],
            [],
        ),
        (
            "freeze --seed",
            lambda v: ["freeze", str(base / "suite.toml"), "-o", "{root}/out/w.parquet", "--seed", v],
            [],
        ),
        (
            "freeze --limit",
            lambda v: ["freeze", str(base / "suite.toml"), "-o", "{root}/out/w.parquet", "--limit", v],
            [],
        ),
        ("freeze --check", lambda v: ["freeze", "--check", v], []),
        ("simulate --policy", lambda v: ["simulate", "--runs", "20", "--n", "24", "--policy", v], []),
        ("simulate -w", lambda v: ["simulate", "--runs", "20", "-w", v], []),
        ("simulate --n", lambda v: ["simulate", "--runs", "20", "--n", v], []),
        ("simulate --runs", lambda v: ["simulate", "--n", "24", "--runs", v], []),
        ("simulate --seed", lambda v: ["simulate", "--runs", "20", "--n", "24", "--seed", v], []),
        (
            "simulate --control-pass-rate",
            lambda v: ["simulate", "--runs", "20", "--n", "24", "--control-pass-rate", v],
            [],
        ),
        ("simulate --aa-rate", lambda v: ["simulate", "--runs", "20", "--n", "24", "--aa-rate", v], []),
        (
            "simulate --defects-in",
            lambda v: ["simulate", "--runs", "20", "-w", str(base / "w.parquet"), "--defects-in", v],
            [],
        ),
        ("init TRACE", lambda v: ["init", v, "-o", "{root}/out/gate"], []),
        ("init -o", lambda v: ["init", str(base / "trace.jsonl"), "-o", v], []),
        (
            "init --engine",
            lambda v: ["init", str(base / "trace.jsonl"), "-o", "{root}/out/gate", "--engine", v],
            [],
        ),
        ("runs RUNS_DIR", lambda v: ["runs", v], []),
        ("view RUN_DIR", lambda v: ["view", v, "--no-open", "-o", "{root}/out/r.html"], []),
        ("view -o", lambda v: ["view", "{root}/in/run", "--no-open", "-o", v], [run]),
        (
            "view --port",
            lambda v: ["view", "{root}/in/run", "--no-open", "--port", v, "-o", "{root}/out/r.html"],
            [run],
        ),
    ]
    fixtures = [
        special("fifo", "fifo"),
        special("folder", "folder"),
        special("loop", "loop"),
        special("dangling", "dangling"),
    ]
    always = ["not-utf8", "long", "newline", "fifo", "traversal", "empty", "huge-int", "negative"]
    for number, (option, make, preps) in enumerate(options):
        rest = random.Random(number).sample(sorted(set(ARG_VALUES) - set(always)), 6)
        for label in always + rest:
            value = ARG_VALUES[label]
            argv = make(value)
            writes_output = any(option.endswith(o) for o in (" -o", "--run-dir", "--samples"))
            # an output path the user names is theirs to write (the traversal's target, an empty folder,
            # the target of a dangling link); replacing a named pipe with a file still counts
            allow = ["outside/sentinel.txt", "in/folder", "nowhere"] if writes_output else []
            allow += ["in/run"] if "resume" in option else []
            yield Case("cli", f"{option} {label}", argv, [*fixtures, *preps], ANY, allow=allow)
