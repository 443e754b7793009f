"""Version skew: the manifest's `kvgate_version`, result parts declaring other schema versions (made by
`hostile_inputs.py`), and schema versions the manifest declares; × every command that reads a run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from hostile.case import ANY, REFUSED, Case
from hostile.run_dirs import RUN_COMMANDS
from hostile.sandbox import copy, set_in_manifest


def version_class(base: Path) -> Iterator[Case]:
    run = base / "run"
    versions = ["0.0.1", "0.1.1", "1.0.0", "99.0.0", "0.1.0.dev0", "", "x" * 300, "0.1.0\n", "0.1.0+evil"]
    for command, (argv, allow) in RUN_COMMANDS.items():
        for v in versions:
            prep = set_in_manifest("kvgate_version", v)
            expect = ANY if command in ("runs", "report", "report json -o", "view") else REFUSED
            yield Case(
                "version",
                f"kvgate_version {v[:12]!r} via {command}",
                argv,
                [copy(run, "run"), prep],
                expect,
                allow=allow,
            )
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
            prep = set_in_manifest(key, value)
            yield Case(
                "version",
                f"manifest {key}={value} via {command}",
                argv,
                [copy(run, "run"), prep],
                ANY,
                allow=allow,
            )
