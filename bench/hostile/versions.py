"""Version skew: the manifest's `kvgate_version`, result parts declaring other schema versions (made by
`hostile_inputs.py`), and schema versions the manifest declares; × every command that reads a run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hostile.case import ANY, REFUSED, Case
from hostile.run_dirs import RUN_COMMANDS
from hostile.sandbox import copy, set_in_manifest


def manifest_set(run: Path, command: str, label: str, key: str, value: Any, expect: set[int]) -> Case:
    """The run copied, its manifest's `key` set to `value`, read by `command` (of RUN_COMMANDS)."""
    argv, allow = RUN_COMMANDS[command]
    prep = [copy(run, "run"), set_in_manifest(key, value)]
    return Case("version", f"{label} via {command}", argv, prep, expect, allow=allow)


def version_class(base: Path) -> Iterator[Case]:
    run = base / "run"
    versions = ["0.0.1", "0.1.1", "1.0.0", "99.0.0", "0.1.0.dev0", "", "x" * 300, "0.1.0\n", "0.1.0+evil"]
    for command, (argv, allow) in RUN_COMMANDS.items():
        for v in versions:
            expect = ANY if command in ("runs", "report", "report json -o", "view") else REFUSED
            yield manifest_set(run, command, f"kvgate_version {v[:12]!r}", "kvgate_version", v, expect)
        for folder in sorted((base / "versions").iterdir()):
            expect = ANY if command == "runs" else REFUSED
            if (
                folder.name in ("part-version-none", "part-version-3", "part-version-1")
                or "forged" in folder.name
            ):
                expect = ANY  # an older version is upgraded on read; forged values get their verdicts
            yield Case(
                "version", f"{folder.name} via {command}", argv, [copy(folder, "run")], expect, allow=allow
            )
        for key, value in [("schema_version", 99), ("result_schema_version", 99), ("format", "v99")]:
            yield manifest_set(run, command, f"manifest {key}={value}", key, value, ANY)
