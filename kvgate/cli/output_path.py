"""A file the user names for a command to write (`freeze -o`, `report -o`, `--samples`, `view -o`),
checked before any work: a path that cannot be written is refused before a suite is frozen or a run
read, and a file kvgate reads as input is never written over by output of another kind (`--samples
smoke.parquet` replaced the workload its run needs; `freeze -o RUN/manifest.json` replaced a run's
manifest). Refusals are one-line BadInputs.

A file counts as input when it is Parquet (a frozen workload, a trace, a run's results; a workload may
be frozen over a workload), a suite, matrix or policy TOML, a trace (JSON lines of chat requests), or a
run's own file (its manifest, lock or engine log, anything in its `results/` or `server/`); a report may
be written beside them.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

from kvgate.errors import BadInput
from kvgate.rundir.manifest import MANIFEST
from kvgate.spec_kinds import WHAT, is_parquet
from kvgate.tomlspec import toml_file_kind

RUN_FILES = frozenset({MANIFEST, ".lock", "engine.log"})
"""The files of a run's own folder that kvgate writes and reads as the run."""
RUN_FOLDERS = frozenset({"results", "server"})
"""The folders of a run kvgate writes and reads as the run (result parts and their index, server logs)."""
HEAD_BYTES = 1 << 16
"""How much of an existing file is read to tell a trace: its first line, up to 64 KiB."""


def check_output_file(path: Path, writes: str, whole: bool = False) -> None:
    """`path` may be written with `writes` (what the command writes there: "the report", "a workload"):
    not a folder, its nearest existing folder one a file can be made in (an existing device or named
    pipe, written into: itself writable; refused when `whole`, an output renamed into place), and not
    a file of input (`held_input`)."""
    if str(path) == "-":  # was: a file named "-" written in the current folder
        raise BadInput(
            f"cannot write {writes} to '-': kvgate takes it for a file of that name, not for stdout; name a "
            "file (a report is printed on stdout without -o)"
        )
    if os.path.isdir(path):
        raise BadInput(f"cannot write {writes} to {path}: it is a folder; name a file")
    if _written_into(path):
        if whole:  # was refused by the writer, only after the work (`freeze -o /dev/full`: the suite frozen)
            raise BadInput(
                f"cannot write {writes} to {path}: it is a named pipe or a device, and kvgate writes "
                f"{writes} whole, renamed into place; name a file"
            )
        if not os.access(path, os.W_OK):
            raise BadInput(f"cannot write {writes} to {path}: it is not writable; name another path")
    else:
        check_output_folder(path.parent, writes, path)
    held = held_input(path, workload=writes == "a workload")
    if held:
        raise BadInput(f"{path} is {held}; writing {writes} over it would lose it: name another path")


def check_output_folder(folder: Path, writes: str, shown: Path | None = None) -> None:
    """`folder` is a folder kvgate can write into, or one it can make (its nearest existing ancestor is a
    writable folder); `shown` names the path in errors (default: `folder`)."""
    shown = shown or folder
    existing = folder
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    problem = "is a file, not a folder" if not existing.is_dir() else _cannot_make_in(existing)
    if problem:
        raise BadInput(f"cannot write {writes} to {shown}: {existing} {problem}; name another path")


def _cannot_make_in(folder: Path) -> str:
    """Why no file can be made in the existing `folder` ("" when one can): tried with an empty file,
    removed at once, as permissions alone do not tell (to root every folder is writable, /proc and
    /sys included, where no file can be made)."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return "is not writable"
    try:
        fd, probe = tempfile.mkstemp(prefix=".kvgate-probe-", dir=folder)
    except OSError as exc:
        return f"takes no new file ({exc.strerror or exc})"
    os.close(fd)
    os.unlink(probe)
    return ""


def _written_into(path: Path) -> bool:
    """Whether `path` is an existing device or named pipe, which outputs are written into, never
    renamed over (`-o /dev/null`)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def held_input(path: Path, workload: bool = False) -> str:
    """What kvgate input the existing file at `path` is ("" for none, or for no regular file): a frozen
    workload counts as none when `workload` (freezing again over it)."""
    run = run_holding(path)
    if run is not None:
        return f"a file of run {run}, which kvgate verifies"
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return ""
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return ""
    if is_parquet(head):
        if workload and _is_frozen_workload(path):
            return ""
        return "a Parquet file (a frozen workload, a trace or a run's results)"
    if path.suffix.lower() == ".toml":
        kind = toml_file_kind(path)
        return WHAT[kind] if kind else ""
    return WHAT["trace"] if _is_trace(head) else ""


def run_holding(path: Path) -> Path | None:
    """The run folder (a folder with a manifest and results) `path` is one of the own files of: its
    manifest, lock or engine log, or a file anywhere under its `results/` or `server/`."""
    if path.name in RUN_FILES and _is_run(path.parent):
        return path.parent
    for folder in list(path.parents)[:-1]:
        if folder.name in RUN_FOLDERS and _is_run(folder.parent):
            return folder.parent
    return None


def run_around(folder: Path) -> Path | None:
    """The run folder `folder` is, or lies inside; None when it is in none."""
    return next((f for f in (folder, *list(folder.parents)[:-1]) if _is_run(f)), None)


def _is_run(folder: Path) -> bool:
    return (folder / MANIFEST).is_file() and (folder / "results").is_dir()


def _is_frozen_workload(path: Path) -> bool:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kvgate.workload.schema import META_KEY

    try:
        return META_KEY in (pq.ParquetFile(path).schema_arrow.metadata or {})
    except (OSError, pa.ArrowException, UnicodeDecodeError):
        return False


def _is_trace(head: bytes) -> bool:
    """Whether a file opening with `head` is a trace: its first line a JSON object with `messages`."""
    first = head.lstrip().partition(b"\n")[0]
    try:
        record = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(record, dict) and "messages" in record
