"""Run directories damaged: the index and manifest (raw mutations, every field wrong or removed, forged
row counts, parts outside the run), parts, `results/`, the lock, the engine log and the report as
special files and links; × every command that reads a run (`RUN_COMMANDS`)."""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hostile.case import ANY, REFUSED, Arg, Case, Prep
from hostile.sandbox import SPECIAL_KINDS, copy, edit, json_edit, set_in_manifest, special, write

RUN_COMMANDS: dict[str, tuple[list[Arg], list[str]]] = {
    "report": (["report", "{root}/in/run"], []),
    "report json -o": (["report", "{root}/in/run", "--format", "json", "-o", "{root}/out/r.json"], []),
    "resume": (["run", "--resume", "{root}/in/run", "--quiet"], ["in/run"]),
    "view": (["view", "{root}/in/run", "--no-open", "-o", "{root}/out/r.html"], []),
    "runs": (["runs", "{root}/in", "--json"], []),
}


def rundir_class(base: Path) -> Iterator[Case]:
    """Run directories: the index, the manifest, parts, the lock and the engine log, damaged."""
    run = base / "run"
    manifest = json.loads((run / "manifest.json").read_text())
    index = json.loads((run / "results" / "index.json").read_text())
    part = sorted(index["parts"])[0]
    damage: dict[str, tuple[list[Prep], set[int]]] = {}
    raw_json = {
        "not-utf8": b'{"\xff": 1}',
        "deep": b"[" * 100_000 + b"]" * 100_000,
        "empty": b"",
        "null": b"null",
        "list": b"[]",
        "nan": b'{"x": NaN}',
        "huge-number": b'{"x": 1' + b"0" * 5000 + b"}",
        "20MB": b'{"x": "' + b"y" * 20_000_000 + b'"}',
        "70MB": b'{"x": "' + b"y" * 70_000_000 + b'"}',
        "duplicate keys": b'{"run_id": "a", "run_id": "b"}',
        "truncated": b'{"run_id": "',
    }
    for target in ("results/index.json", "manifest.json"):
        for mutation, raw in raw_json.items():
            damage[f"{target} {mutation}"] = ([write(f"run/{target}", raw)], REFUSED)
        for sp in [*SPECIAL_KINDS, "outside-link"]:
            damage[f"{target} as {sp}"] = ([special(f"run/{target}", sp)], REFUSED)
    bad_json_values: dict[str, Any] = {
        "null": None,
        "int": 7,
        "string": "x" * 100,
        "list": [1],
        "dict": {},
        "negative": -1,
        "huge": 10**30,
        "traversal": "../../outside/sentinel.txt",
    }
    for number, key in enumerate(manifest):
        for label in random.Random(number).sample(sorted(bad_json_values), 3):
            value = bad_json_values[label]
            damage[f"manifest {key}={label}"] = ([set_in_manifest(key, value)], ANY)
        damage[f"manifest {key} removed"] = (
            [
                edit(
                    "run/manifest.json",
                    lambda p, k=key: json_edit(p, lambda m: {x: y for x, y in m.items() if x != k}),
                )
            ],
            ANY,
        )
    index_edits: dict[str, Callable[[Any], Any]] = {
        "run_id other": lambda i: {**i, "run_id": "other"},
        "run_id removed": lambda i: {"parts": i["parts"]},
        "parts null": lambda i: {**i, "parts": None},
        "parts list": lambda i: {**i, "parts": [1]},
        "parts empty": lambda i: {**i, "parts": {}},
        "part traversal": lambda i: {
            **i,
            "parts": {"../../outside/sentinel.txt": {"sha256": "0" * 64, "rows": 1}},
        },
        "sha256 wrong": lambda i: {
            **i,
            "parts": {k: {**v, "sha256": "0" * 64} for k, v in i["parts"].items()},
        },
        "sha256 int": lambda i: {**i, "parts": {k: {**v, "sha256": 5} for k, v in i["parts"].items()}},
        "rows negative": lambda i: {**i, "parts": {k: {**v, "rows": -1} for k, v in i["parts"].items()}},
        "rows huge": lambda i: {**i, "parts": {k: {**v, "rows": 10**30} for k, v in i["parts"].items()}},
        "rows string": lambda i: {**i, "parts": {k: {**v, "rows": "4"} for k, v in i["parts"].items()}},
        "rows float": lambda i: {**i, "parts": {k: {**v, "rows": 4.0} for k, v in i["parts"].items()}},
        "entry null": lambda i: {**i, "parts": {k: None for k in i["parts"]}},
        "extra field": lambda i: {**i, "surprise": 1},
        "many parts": lambda i: {
            **i,
            "parts": {f"full/part-{n:05d}.parquet": {"sha256": "0" * 64, "rows": 1} for n in range(100_000)},
        },
    }
    for label, change in index_edits.items():
        damage[f"index {label}"] = (
            [edit("run/results/index.json", lambda p, c=change: json_edit(p, c))],
            REFUSED,
        )

    def absolute_part(root: Path) -> None:  # an index naming a file by absolute path, in the sandbox
        index = root / "in" / "run" / "results" / "index.json"
        absolute = str(root / "outside" / "sentinel.txt")
        json_edit(index, lambda i: {**i, "parts": {absolute: {"sha256": "0" * 64, "rows": 1}}})

    damage["index part absolute"] = ([absolute_part], REFUSED)

    def part_bytes(change: Callable[[bytes], bytes]) -> Prep:
        return edit(f"run/results/{part}", lambda p: p.write_bytes(change(p.read_bytes())))

    damage |= {
        "results removed": ([edit("run/results", shutil.rmtree)], REFUSED),
        "results a file": ([edit("run/results", shutil.rmtree), write("run/results", b"x")], REFUSED),
        "results as fifo": ([special("run/results", "fifo")], REFUSED),
        "results link outside": ([special("run/results", "outside-dir-link")], REFUSED),
        "part truncated": ([part_bytes(lambda b: b[: len(b) // 2])], REFUSED),
        "part emptied": ([part_bytes(lambda b: b"")], REFUSED),
        "part garbage": ([part_bytes(lambda b: random.Random(2).randbytes(len(b)))], REFUSED),
        "part removed": ([edit(f"run/results/{part}", Path.unlink)], REFUSED),
        "part extra": (
            [edit(f"run/results/{part}", lambda p: shutil.copy(p, p.with_name("part-09999.parquet")))],
            REFUSED,
        ),
        "arm folder extra": (
            [edit("run/results", lambda p: shutil.copytree(p / part.split("/")[0], p / "intruder"))],
            REFUSED,
        ),
        "manifest removed": ([edit("run/manifest.json", Path.unlink)], REFUSED),
        "lock as fifo": ([special("run/.lock", "fifo")], ANY),
        "lock as folder": ([special("run/.lock", "folder")], ANY),
        "lock link outside": ([special("run/.lock", "outside-link")], ANY),
        "engine.log link outside": ([special("run/engine.log", "outside-link")], ANY),
        "engine.log hard link outside": ([special("run/engine.log", "hardlink")], ANY),
        "engine.log as fifo": ([special("run/engine.log", "fifo")], ANY),
        "engine.log as folder": ([special("run/engine.log", "folder")], ANY),
        "server link outside": ([special("run/server", "outside-dir-link")], ANY),
        "report.html link outside": ([special("run/report.html", "outside-link")], ANY),
        "run folder not utf8 name": (
            [edit("run", lambda p: os.symlink(p, p.parent / os.fsdecode(b"r\xff")))],
            ANY,
        ),
    }
    for sp in [*SPECIAL_KINDS, "outside-link", "hardlink"]:
        damage[f"part as {sp}"] = ([special(f"run/results/{part}", sp)], REFUSED)
    for command, (argv, allow) in RUN_COMMANDS.items():
        for mutation, (preps, expect) in damage.items():
            if command in ("runs", "report json -o") and mutation.startswith("manifest "):
                continue
            exp = ANY if command == "runs" else expect
            # what a crash leaves (a part unlisted or gone, no index) a resume repairs: any exit but 70
            repaired = (
                "results removed",
                "part removed",
                "index parts empty",
                "results/index.json as dangling",
            )
            if command == "resume" and mutation in repaired:
                exp = ANY
            yield Case(
                "rundir", f"{mutation} via {command}", argv, [copy(run, "run"), *preps], exp, allow=allow
            )
