"""The result store: append-only Parquet parts per arm, each written to a temp file, fsynced, renamed.

    runs/<run_id>/results/<arm>/part-NNNNN.parquet          one flush of a pass
    runs/<run_id>/results/<arm>/part-AAAAA-BBBBB.parquet    parts AAAAA..BBBBB merged (`compact`)

A crash loses at most the part being written; a resumed run skips exactly the rows already stored.
Every part is bound to its run and arm in its metadata and listed in `results/index.json` with its sha256
(`part_index`); a merged part is read back and verified before the parts it covers leave the index and
the disk, and `reconcile` (run when a run is opened) adopts a verified part a crash left unlisted.
A range part supersedes every other part whose numbers lie inside its range: readers ignore those, so a
crash between writing a merged part and deleting the parts it covers neither loses nor repeats a row.
New parts are numbered after the highest number in use, range ends included. Leftover temp files and
superseded parts are never read and are removed when the run is opened again; a part that cannot be
read, or that repeats a stored row, is named in a one-line error (exit 2). A part that cannot be written
(a full disk) is an infrastructure error (exit 4) that leaves the parts before it intact; a merge that
cannot be written leaves the store as it was and is retried at the next pass end or resume.
"""

from __future__ import annotations

import contextlib
import errno
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kvgate.arrow_build import table as arrow_table
from kvgate.errors import BadInput, EngineFailure
from kvgate.names import check_name
from kvgate.rundir import part_index
from kvgate.rundir.part_index import binding, key_of, read_binding, read_index, stored_run_id, write_index
from kvgate.rundir.result_part import RESULT_SCHEMA, RESULT_SCHEMA_VERSION, RESULT_VERSION_KEY, read_part
from kvgate.workload.schema import atomic_write

_PART = re.compile(r"^part-(\d{5,})(?:-(\d{5,}))?\.parquet$")
KEY_COLUMNS = ("arm", "replicate", "case_id", "attempt")
RowKey = tuple[str, int, str, int]
"""(arm, replicate, case_id, attempt): what a stored row answers."""


@dataclass(frozen=True)
class Part:
    """A stored part file and the part numbers it covers (first == last for a part of one flush)."""

    path: Path
    first: int
    last: int

    def covers(self, other: Part) -> bool:
        """Whether this range part supersedes `other` (a different part inside its range)."""
        inside = self.first <= other.first and other.last <= self.last
        return inside and (self.first, self.last) != (other.first, other.last)


def results_dir(run_dir: Path) -> Path:
    return run_dir / "results"


def _arm_parts(arm_dir: Path) -> list[Part]:
    """Every part file of an arm, superseded ones included, in part-number order."""
    if not arm_dir.is_dir():
        return []
    found = [(m, p) for p in arm_dir.iterdir() if (m := _PART.search(p.name))]
    for _, path in found:
        if path.is_symlink() or not path.is_file():
            raise BadInput(f"result part {path} is not a regular file (a link, a folder or a device)")
    parts = [Part(p, int(m.group(1)), int(m.group(2) or m.group(1))) for m, p in found]
    return sorted(parts, key=lambda part: (part.first, part.last))


def _split(parts: list[Part]) -> tuple[list[Part], list[Part]]:
    """(live, superseded): a part is superseded when a range part covers it."""
    ranges = [r for r in parts if r.last > r.first]
    live: list[Part] = []
    superseded: list[Part] = []
    for part in parts:
        (superseded if any(r.covers(part) for r in ranges) else live).append(part)
    return live, superseded


def _arm_dirs(run_dir: Path) -> list[Path]:
    root = results_dir(run_dir)
    return sorted(d for d in root.iterdir() if d.is_dir()) if root.is_dir() else []


def part_paths(run_dir: Path) -> list[Path]:
    """The live parts of the run: by arm, then in part-number order; superseded parts left out."""
    return [part.path for arm_dir in _arm_dirs(run_dir) for part in _split(_arm_parts(arm_dir))[0]]


def next_part_number(arm_dir: Path) -> int:
    """One past the highest part number in use in `arm_dir` (range ends and superseded parts included)."""
    return max((part.last for part in _arm_parts(arm_dir)), default=-1) + 1


def write_part(run_dir: Path, arm: str, rows: list[dict[str, Any]]) -> Path:
    """Append `rows` of `arm` as the arm's next part (atomic: temp file, fsync, rename), bound to the run
    and listed in the index."""
    check_name("arm", arm)
    for folder in (results_dir(run_dir), results_dir(run_dir) / arm):
        if folder.is_symlink():
            raise BadInput(f"{folder} is a link: kvgate writes a run's results only inside its folder")
    run_id = stored_run_id(run_dir)
    table = arrow_table(rows, RESULT_SCHEMA).replace_schema_metadata(_metadata(run_id, arm))
    arm_dir = results_dir(run_dir) / arm
    path = arm_dir / "part-?????.parquet"
    try:
        arm_dir.mkdir(parents=True, exist_ok=True)
        path = arm_dir / f"part-{next_part_number(arm_dir):05d}.parquet"
        _write_table(path, table)
        _update_index(run_dir, run_id, add={path: table.num_rows})
    except OSError as exc:
        reason = "the disk is full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
        raise EngineFailure(
            f"cannot store {path}: {reason}; the parts stored before it are intact: "
            f"free the space, then `kvgate run --resume {run_dir}`"
        ) from None
    return path


def _metadata(run_id: str | None, arm: str) -> dict[bytes, bytes]:
    return {**binding(run_id, arm), RESULT_VERSION_KEY: str(RESULT_SCHEMA_VERSION).encode()}


def _write_table(path: Path, table: pa.Table) -> None:
    atomic_write(path, lambda f: pq.write_table(table, f, write_page_checksum=True))


def _update_index(run_dir: Path, run_id: str | None, add: dict[Path, int], drop: Iterable[Path] = ()) -> None:
    """List the parts in `add` (path → rows) and forget those in `drop`, in one atomic index write."""
    results = results_dir(run_dir)
    parts = read_index(results)
    for path in drop:
        parts.pop(key_of(results, path), None)
    for path, rows in add.items():
        parts[key_of(results, path)] = part_index.entry(path, rows)
    write_index(results, run_id, parts)


def compact(run_dir: Path, arm: str) -> Path | None:
    """Merge the arm's parts of one flush stored after its last range part into one range part.

    The merged rows keep the order reading the parts gives. The merged part is written atomically before
    the parts it covers are deleted; a crash in between leaves them superseded (ignored, removed when
    the run is opened again). A merge that cannot be written (a full disk) leaves the store as it was
    and returns None: the small parts stay valid and a later pass end or resume merges them. A corrupt
    part is a BadInput naming it, as when reading. Returns the merged part, or None when fewer than two
    parts wait. Call only while holding the run's lock.
    """
    arm_dir = results_dir(run_dir) / arm
    live = _split(_arm_parts(arm_dir))[0]
    last_range = max((p.last for p in live if p.last > p.first), default=-1)
    small = [p for p in live if p.first == p.last and p.first > last_range]
    if len(small) < 2:
        return None
    run_id = stored_run_id(run_dir)
    table = pa.concat_tables([read_part(p.path) for p in small])
    table = table.replace_schema_metadata(_metadata(run_id, arm))
    merged = arm_dir / f"part-{small[0].first:05d}-{small[-1].last:05d}.parquet"
    try:
        _write_table(merged, table)
    except OSError:
        with contextlib.suppress(OSError):  # renamed but not made durable: the small parts hold the rows
            merged.unlink(missing_ok=True)
        return None
    if not read_part(merged).equals(table):
        merged.unlink(missing_ok=True)
        raise EngineFailure(f"merged part {merged} does not read back as written: the disk is failing")
    try:
        _update_index(run_dir, run_id, add={merged: table.num_rows}, drop=[p.path for p in small])
    except OSError:
        return merged  # listed on the next open (`reconcile`), the small parts deleted then
    for part in small:
        with contextlib.suppress(OSError):  # a part left here is superseded: ignored, removed on reopen
            part.path.unlink(missing_ok=True)
    return merged


def remove_temp_files(run_dir: Path) -> list[Path]:
    """Delete temp files a killed writer left behind (call only while holding the run's lock)."""
    leftovers = [p for p in run_dir.glob("**/.*.tmp") if p.is_file()]
    for path in leftovers:
        path.unlink(missing_ok=True)
    return leftovers


def remove_superseded_parts(run_dir: Path) -> list[Path]:
    """Delete parts a merge covered but a crash left behind, each only once the range part covering it
    is read and holds every row of it (call only while holding the run's lock)."""
    leftovers = []
    for arm_dir in _arm_dirs(run_dir):
        parts = _arm_parts(arm_dir)
        live, superseded = _split(parts)
        for part in superseded:
            cover = next(r for r in live if r.covers(part))
            missing = _keys(read_part(part.path)) - _keys(read_part(cover.path))
            if missing:
                raise BadInput(
                    f"result part {cover.path} covers {part.path.name} but lacks its row {min(missing)}: "
                    "the store was tampered with"
                )
            leftovers.append(part.path)
    for path in leftovers:
        path.unlink(missing_ok=True)
    return leftovers


def _keys(table: pa.Table) -> set[RowKey]:
    data = table.select(list(KEY_COLUMNS)).to_pydict()
    return set(zip(data["arm"], data["replicate"], data["case_id"], data["attempt"], strict=True))


def reconcile(run_dir: Path, run_id: str) -> list[Path]:
    """Check the store against its index when a run is opened (call only while holding the run's lock).

    A listed part must match its checksum; one deleted (to regenerate its rows) leaves the index. A live
    part a crash left unlisted is read, checked to be bound to this run and its arm, and listed;
    superseded parts leave the index (`remove_superseded_parts` deletes them). Anything else is a
    BadInput naming the part.
    Returns the parts adopted.
    """
    results = results_dir(run_dir)
    listed = read_index(results, run_id)
    parts: dict[str, dict[str, Any]] = {}
    adopted = []
    for arm_dir in _arm_dirs(run_dir):
        for part in _split(_arm_parts(arm_dir))[0]:
            key = key_of(results, part.path)
            if key in listed:
                if part_index.file_sha256(part.path) != listed[key]["sha256"]:
                    changed(part.path)
                parts[key] = listed[key]
                continue
            table = read_part(part.path)
            check_bound(part.path, read_binding(table.schema.metadata), run_id, arm_dir.name)
            if table.num_rows and set(table["arm"].unique().to_pylist()) != {arm_dir.name}:
                raise BadInput(f"result part {part.path} holds rows of another arm")
            parts[key] = part_index.entry(part.path, table.num_rows)
            adopted.append(part.path)
    if parts != listed or (parts and not part_index.index_path(results).exists()):
        write_index(results, run_id, parts)
    return adopted


def changed(path: Path) -> None:
    """Raise the BadInput for a part whose checksum differs: corrupt when it does not read, else edited."""
    read_part(path)
    raise BadInput(f"result part {path} changed after it was stored (its sha256 differs from the index)")


def check_bound(path: Path, bound: dict[str, Any] | None, run_id: str, arm: str) -> None:
    """A part's binding must name this run and the arm whose folder holds it."""
    if bound is None:
        raise BadInput(f"result part {path} is not bound to any run: it was not written by this run")
    if bound.get("run_id") != run_id:
        raise BadInput(f"result part {path} belongs to run {bound.get('run_id')!r}, not {run_id}")
    if bound.get("arm") != arm:
        raise BadInput(f"result part {path} belongs to arm {bound.get('arm')!r}, not {arm!r}")


def read_results(run_dir: Path, columns: Iterable[str] | None = None) -> pa.Table:
    """Every stored row of the run (`columns` of it); a corrupt or foreign part is a BadInput naming it.

    Every part is read whole, so its page checksums are verified whichever columns are asked for.
    """
    cols = list(columns) if columns is not None else None
    tables = [read_part(path) for path in part_paths(run_dir)]
    if not tables:
        return _schema(cols).empty_table()
    table = pa.concat_tables(tables)
    return table if cols is None else table.select(cols)


def _schema(cols: list[str] | None) -> pa.Schema:
    return RESULT_SCHEMA if cols is None else pa.schema([RESULT_SCHEMA.field(c) for c in cols])


def stored_keys(run_dir: Path) -> set[RowKey]:
    """The (arm, replicate, case_id, attempt) of every stored row; a row stored twice is a BadInput."""
    keys: set[RowKey] = set()
    for path in part_paths(run_dir):
        data = read_part(path).select(list(KEY_COLUMNS)).to_pydict()
        for key in zip(data["arm"], data["replicate"], data["case_id"], data["attempt"], strict=True):
            if key in keys:
                raise BadInput(f"result part {path} repeats a stored row {key}: the store was tampered with")
            keys.add(key)
    return keys
