"""The result store: append-only Parquet parts per arm, each written to a temp file, fsynced, renamed.

    runs/<run_id>/results/<arm>/part-NNNNN.parquet

A crash loses at most the part being written; a resumed run skips exactly the rows already stored.
Leftover temp files are ignored; a part that cannot be read is named in a one-line error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kvgate.errors import BadInput
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
_PART = re.compile(r"part-(\d{5})\.parquet$")
RowKey = tuple[str, int, str, int]
"""(arm, replicate, case_id, attempt): what a stored row answers."""


def results_dir(run_dir: Path) -> Path:
    return run_dir / "results"


def part_paths(run_dir: Path) -> list[Path]:
    return sorted(p for p in results_dir(run_dir).glob("*/part-*.parquet") if _PART.search(p.name))


def write_part(run_dir: Path, arm: str, rows: list[dict[str, Any]]) -> Path:
    """Append `rows` of `arm` as the arm's next part (atomic: temp file, fsync, rename)."""
    arm_dir = results_dir(run_dir) / arm
    arm_dir.mkdir(parents=True, exist_ok=True)
    existing = [int(m.group(1)) for p in arm_dir.iterdir() if (m := _PART.search(p.name))]
    path = arm_dir / f"part-{max(existing, default=-1) + 1:05d}.parquet"
    table = pa.Table.from_pylist(rows, schema=RESULT_SCHEMA)
    atomic_write(path, lambda f: pq.write_table(table, f))
    return path


def read_results(run_dir: Path, columns: Iterable[str] | None = None) -> pa.Table:
    """Every stored row of the run; a corrupt or foreign part is a BadInput naming the file."""
    tables = []
    cols = list(columns) if columns is not None else None
    for path in part_paths(run_dir):
        try:
            table = pq.read_table(path, columns=cols)
        except (OSError, pa.ArrowException) as exc:
            raise BadInput(f"result part {path} is corrupt: {str(exc).splitlines()[0]}") from None
        expected = RESULT_SCHEMA if cols is None else pa.schema([RESULT_SCHEMA.field(c) for c in cols])
        if not table.schema.equals(expected, check_metadata=False):
            raise BadInput(f"result part {path} does not have the result schema")
        tables.append(table)
    if not tables:
        return RESULT_SCHEMA.empty_table() if cols is None else pa.schema(
            [RESULT_SCHEMA.field(c) for c in cols]
        ).empty_table()
    return pa.concat_tables(tables)


def stored_keys(run_dir: Path) -> set[RowKey]:
    table = read_results(run_dir, ["arm", "replicate", "case_id", "attempt"])
    data = table.to_pydict()
    return set(zip(data["arm"], data["replicate"], data["case_id"], data["attempt"], strict=True))
