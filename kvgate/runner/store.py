"""The result store: append-only Parquet parts per arm, each written to a temp file, fsynced, renamed.

    runs/<run_id>/results/<arm>/part-NNNNN.parquet          one flush of a pass
    runs/<run_id>/results/<arm>/part-AAAAA-BBBBB.parquet    parts AAAAA..BBBBB merged (`compact`)

A crash loses at most the part being written; a resumed run skips exactly the rows already stored.
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

from kvgate.errors import BadInput, EngineFailure
from kvgate.workload.schema import atomic_write

RESULT_SCHEMA = pa.schema(
    [
        ("case_id", pa.string()),
        ("arm", pa.string()),
        ("replicate", pa.int32()),
        ("attempt", pa.int32()),
        ("output_text", pa.string()),
        ("output_token_ids", pa.list_(pa.int32())),
        ("passed", pa.bool_()),
        ("fail_kind", pa.string()),
        ("detail", pa.string()),
        ("n_prompt_tokens", pa.int32()),
        ("n_cached_tokens", pa.int32()),
        ("n_kv_entries_kept", pa.int32()),
        ("ttft_s", pa.float64()),
        ("latency_s", pa.float64()),
        ("mean_logprob", pa.float64()),
        ("min_logprob", pa.float64()),
        ("first_divergence", pa.int32()),
    ]
)
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
    """Append `rows` of `arm` as the arm's next part (atomic: temp file, fsync, rename)."""
    table = pa.Table.from_pylist(rows, schema=RESULT_SCHEMA)
    arm_dir = results_dir(run_dir) / arm
    path = arm_dir / "part-?????.parquet"
    try:
        arm_dir.mkdir(parents=True, exist_ok=True)
        path = arm_dir / f"part-{next_part_number(arm_dir):05d}.parquet"
        _write_table(path, table)
    except OSError as exc:
        reason = "the disk is full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
        raise EngineFailure(
            f"cannot store {path}: {reason}; the parts stored before it are intact: "
            f"free the space, then `kvgate run --resume {run_dir}`"
        ) from None
    return path


def _write_table(path: Path, table: pa.Table) -> None:
    atomic_write(path, lambda f: pq.write_table(table, f, write_page_checksum=True))


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
    table = pa.concat_tables([_read_part(p.path) for p in small])
    merged = arm_dir / f"part-{small[0].first:05d}-{small[-1].last:05d}.parquet"
    try:
        _write_table(merged, table)
    except OSError:
        with contextlib.suppress(OSError):  # renamed but not made durable: the small parts hold the rows
            merged.unlink(missing_ok=True)
        return None
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
    """Delete parts a merge covered but a crash left behind (call only while holding the run's lock)."""
    leftovers = [part.path for arm_dir in _arm_dirs(run_dir) for part in _split(_arm_parts(arm_dir))[1]]
    for path in leftovers:
        path.unlink(missing_ok=True)
    return leftovers


def read_results(run_dir: Path, columns: Iterable[str] | None = None) -> pa.Table:
    """Every stored row of the run (`columns` of it); a corrupt or foreign part is a BadInput naming it.

    Every part is read whole, so its page checksums are verified whichever columns are asked for.
    """
    cols = list(columns) if columns is not None else None
    tables = [_read_part(path) for path in part_paths(run_dir)]
    if not tables:
        return _schema(cols).empty_table()
    table = pa.concat_tables(tables)
    return table if cols is None else table.select(cols)


def _schema(cols: list[str] | None) -> pa.Schema:
    return RESULT_SCHEMA if cols is None else pa.schema([RESULT_SCHEMA.field(c) for c in cols])


def _read_part(path: Path) -> pa.Table:
    try:
        with pq.ParquetFile(path, page_checksum_verification=True) as part:
            table = part.read()
    except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:  # the last: a garbled column name
        lines = str(exc).splitlines() or [type(exc).__name__]
        raise BadInput(
            f"result part {path} is corrupt ({lines[0]}); delete it and `--resume` to regenerate its rows"
        ) from None
    if not table.schema.equals(RESULT_SCHEMA, check_metadata=False):
        raise BadInput(f"result part {path} does not have the result schema")
    return table


def stored_keys(run_dir: Path) -> set[RowKey]:
    """The (arm, replicate, case_id, attempt) of every stored row; a row stored twice is a BadInput."""
    keys: set[RowKey] = set()
    for path in part_paths(run_dir):
        data = _read_part(path).select(list(KEY_COLUMNS)).to_pydict()
        for key in zip(data["arm"], data["replicate"], data["case_id"], data["attempt"], strict=True):
            if key in keys:
                raise BadInput(f"result part {path} repeats a stored row {key}: the store was tampered with")
            keys.add(key)
    return keys
