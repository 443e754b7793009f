"""Workloads × truncations, flipped bytes, garbage and forged Parquet files (`hostile_inputs.py` forges
them), as special files and at a non-UTF-8 path, × `freeze --check`, `run` and `simulate -w`."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from hostile.case import ANY, REFUSED, Case
from hostile.sandbox import write
from hostile.spec_files import as_special_files, at_non_utf8_path, file_commands


def workload_class(base: Path) -> Iterator[Case]:
    data = (base / "w.parquet").read_bytes()
    n = len(data)
    mutations: dict[str, bytes] = {
        f"truncated to {k}": data[:k] for k in (0, 1, 4, 8, n // 4, n // 2, n - 8, n - 1)
    }
    for i in range(28):
        at = (i * 7919) % n if i < 20 else n - 1 - (i - 20)
        flipped = bytearray(data)
        flipped[at] ^= 0xFF
        mutations[f"byte {at} flipped"] = bytes(flipped)
    mutations["garbage"] = random.Random(1).randbytes(n)
    mutations["doubled"] = data + data
    for path in sorted((base / "forged").iterdir()):
        mutations[f"forged {path.stem}"] = path.read_bytes()
    for command, (argv, preps) in file_commands("workload", base).items():
        for mutation, raw in mutations.items():
            if command == "simulate" and (mutation.startswith("forged") or mutation.startswith("byte")):
                continue
            expect = ANY if mutation in ("forged twice", "doubled") else REFUSED  # doubled: the footer reads
            if mutation.startswith("byte") or mutation.startswith("forged"):
                expect = ANY  # a flipped byte in a string, a forgery freeze accepts: the hash says
            yield Case("workload", f"{mutation} via {command}", argv, [write("F", raw), *preps], expect)
        yield from as_special_files("workload", command, argv, data, preps)
        yield at_non_utf8_path("workload", command, argv, data, preps, b"W\xff.parquet")
