"""The result store: append-only Parquet parts per arm, each written to a temp file, fsynced, renamed.

    runs/<run_id>/results/<arm>/part-NNNNN.parquet

A crash loses at most the part being written; a resumed run skips exactly the rows already stored.
Leftover temp files are never read and are removed when the run is opened again; a part that cannot be
read, or that repeats a stored row, is named in a one-line error (exit 2). A part that cannot be written
(a full disk) is an infrastructure error (exit 4) that leaves the parts before it intact.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Iterable
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
_PART = re.compile(r"^part-(\d{5})\.parquet$")
KEY_COLUMNS = ("arm", "replicate", "case_id", "attempt")
RowKey = tuple[str, int, str, int]
"""(arm, replicate, case_id, attempt): what a stored row answers."""


def results_dir(run_dir: Path) -> Path:
    return run_dir / "results"


def part_paths(run_dir: Path) -> list[Path]:
    return sorted(p for p in results_dir(run_dir).glob("*/part-*.parquet") if _PART.search(p.name))


def write_part(run_dir: Path, arm: str, rows: list[dict[str, Any]]) -> Path:
    """Append `rows` of `arm` as the arm's next part (atomic: temp file, fsync, rename)."""
    table = pa.Table.from_pylist(rows, schema=RESULT_SCHEMA)
    arm_dir = results_dir(run_dir) / arm
    path = arm_dir / "part-?????.parquet"
    try:
        arm_dir.mkdir(parents=True, exist_ok=True)
        existing = [int(m.group(1)) for p in arm_dir.iterdir() if (m := _PART.search(p.name))]
        path = arm_dir / f"part-{max(existing, default=-1) + 1:05d}.parquet"
        atomic_write(path, lambda f: pq.write_table(table, f, write_page_checksum=True))
    except OSError as exc:
        reason = "the disk is full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
        raise EngineFailure(
            f"cannot store {path}: {reason}; the parts stored before it are intact: "
            f"free the space, then `kvgate run --resume {run_dir}`"
        ) from None
    return path


def remove_temp_files(run_dir: Path) -> list[Path]:
    """Delete temp files a killed writer left behind (call only while holding the run's lock)."""
    leftovers = [p for p in run_dir.glob("**/.*.tmp") if p.is_file()]
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
    except (OSError, pa.ArrowException) as exc:
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
