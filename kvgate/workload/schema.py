"""Workload Parquet: schema_version 1, one row per case, a content sha256 in the file's metadata.

Reading checks the schema version and the rows against the stored hash, so a workload edited after
freezing is refused rather than silently run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kvgate.arrow_build import table as arrow_table
from kvgate.arrow_numpy import to_numpy
from kvgate.errors import BadInput
from kvgate.spec_kinds import GOES_TO, WHAT
from kvgate.tomlspec import toml_file_kind
from kvgate.workload.case import SOURCE_ID, Case
from kvgate.workload.checks import check_cases, check_meta
from kvgate.workload.decoded_size import read_bounded

SCHEMA_VERSION = 1
MAX_VOCAB = 1 << 22
"""Token ids below this share int objects when read (`_token_tuples`); larger ones are kept as read."""
META_KEY = b"kvgate.workload"
REFREEZE = "it is damaged or cut short; freeze it again (or copy it whole)"
"""What to do with a workload file that cannot be read."""

_FIXED = pa.schema(
    [
        ("case_id", pa.string()),
        ("suite", pa.string()),
        ("task", pa.string()),
        ("messages", pa.string()),
        ("prompt_token_ids", pa.list_(pa.int32())),
        ("n_prompt_tokens", pa.int32()),
        ("max_new_tokens", pa.int32()),
        ("validator", pa.string()),
        ("expected", pa.string()),
        ("validator_args", pa.string()),
        ("prefix_group", pa.string()),
        ("question_start", pa.int32()),
        ("critical", pa.bool_()),
    ]
)
FIXED_COLUMNS = tuple(_FIXED.names)


@dataclass(frozen=True)
class Workload:
    """A read workload: its cases in file order, its metadata, and the verified content hash."""

    cases: tuple[Case, ...]
    meta: dict[str, Any]
    sha256: str
    path: Path | None = None

    @property
    def slice_columns(self) -> tuple[str, ...]:
        return tuple(self.meta.get("slice_columns", ()))


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def content_sha256(cases: tuple[Case, ...] | list[Case], slice_columns: tuple[str, ...]) -> str:
    """sha256 over every row's canonical JSON, in order: what the workload asks, not how it is stored."""
    return _rows_sha256(_row(case, slice_columns) for case in cases)


def _rows_sha256(rows: Iterable[dict[str, Any]]) -> str:
    digest = hashlib.sha256()
    for row in rows:
        digest.update(_dumps(row).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def _row(case: Case, slice_columns: tuple[str, ...]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "case_id": case.case_id,
        "suite": case.suite,
        "task": case.task,
        "messages": _dumps(list(case.messages)),
        "prompt_token_ids": case.prompt_token_ids,  # a tuple: JSON writes it as a list
        "n_prompt_tokens": case.n_prompt_tokens,
        "max_new_tokens": case.max_new_tokens,
        "validator": case.validator,
        "expected": _dumps(case.expected),
        "validator_args": _dumps(case.validator_args),
        "prefix_group": case.prefix_group,
        "question_start": case.question_start,
        "critical": case.critical,
    }
    if case.source_id is not None:
        row[SOURCE_ID] = case.source_id
    for col in slice_columns:
        row[col] = case.task if col == "task" else case.slices.get(col)
    return row


def slice_columns_of(cases: list[Case]) -> tuple[str, ...]:
    """The workload's slice columns: "task" first, then every slice key the cases use, sorted."""
    keys = sorted({k for c in cases for k in c.slices} - {"task"})
    return ("task", *keys)


def write_workload(cases: list[Case], path: Path, meta: dict[str, Any]) -> str:
    """Write `cases` atomically (temp file, fsync, rename), checked as reading checks them; returns the
    content sha256. A path that cannot be written is a one-line BadInput."""
    check_cases(cases, f"workload {path}")
    slice_columns = slice_columns_of(cases)
    rows = [_row(c, slice_columns) for c in cases]
    sha = _rows_sha256(rows)
    schema = _FIXED
    if any(c.source_id is not None for c in cases):
        schema = schema.append(pa.field(SOURCE_ID, pa.string()))
    for col in slice_columns:
        if col not in schema.names:
            schema = schema.append(pa.field(col, pa.string()))
    table = arrow_table(rows, schema)  # token ids through one flat int32 buffer, no pandas
    full_meta = {
        **meta,
        "schema_version": SCHEMA_VERSION,
        "slice_columns": list(slice_columns),
        "n_cases": len(cases),
        "content_sha256": sha,
    }
    check_meta(full_meta, f"workload {path}")
    table = table.replace_schema_metadata({META_KEY: _dumps(full_meta).encode()})
    try:
        atomic_write(path, lambda f: pq.write_table(table, f, compression="zstd"))
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from None
    return sha


def atomic_write(path: Path, write: Any) -> None:
    """Call `write(file)` on a temp file beside `path`, fsync it, then rename it over `path`. The file
    gets the mode a plain create would (0666 less the umask). A folder, named pipe or device at `path`
    is refused (BadInput), never renamed over: a plain file would take the device's place."""
    if path.exists() and not path.is_file():
        raise BadInput(f"cannot write {path}: it is a folder, a named pipe or a device; name a file")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def open_workload(path: Path) -> tuple[pq.ParquetFile, dict[str, Any]]:
    """The workload's Parquet file and its checked kvgate metadata (`read_meta`), its row count the one
    the metadata states: the checks every reader makes (`kvgate run`, `kvgate report`) before any row."""
    try:
        if path.exists() and not path.is_file():  # a folder, a FIFO or a device: never opened
            raise BadInput(f"workload {path} is not a regular file")
        parquet = pq.ParquetFile(path)
        parquet.schema_arrow  # noqa: B018  (decoded here, where a garbled footer is caught)
    except FileNotFoundError:
        raise BadInput(f"workload {path} does not exist; check the path (kvgate freeze writes one)") from None
    except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:  # the last: a garbled column name
        unfrozen = not_frozen(path)
        if unfrozen:
            raise BadInput(f"workload {path} is {unfrozen}") from None
        raise BadInput(f"workload {path} is not readable Parquet ({_first_line(exc)}): {REFREEZE}") from None
    meta = read_meta(parquet, path)
    if parquet.metadata.num_rows != meta["n_cases"]:  # before any row is read
        raise BadInput(
            f"workload {path} has {parquet.metadata.num_rows} rows; its metadata says {meta['n_cases']}"
        )
    return parquet, meta


TRACE_SUFFIXES = (".jsonl", ".json", ".ndjson")


def not_frozen(path: Path) -> str:
    """What a trace, a suite, a matrix or a policy given where a frozen workload belongs is, and what to
    do ("" for anything else)."""
    suffix = path.suffix.lower()
    if suffix in TRACE_SUFFIXES:
        return (
            "a trace, not a frozen workload: freeze it first (a suite TOML with [[trace]] "
            f'path = "{path.name}", which `kvgate init {path}` writes, then {_FREEZE.format("SUITE.toml")})'
        )
    if suffix == ".toml":
        kind = toml_file_kind(path) or "suite"  # a TOML file of no single kind: taken for a suite
        if kind != "suite":
            return f"{WHAT[kind]}, not a frozen workload: {GOES_TO[kind]}"
        return f"a suite, not a frozen workload: freeze it first with {_FREEZE.format(path)}"
    return ""


_FREEZE = (
    "`kvgate freeze {} -o WORKLOAD.parquet` (with `--model MODEL` for a model's tokens; the word tokenizer "
    "serves --engine fake) and give WORKLOAD.parquet instead"
)
"""How to freeze a suite, for a message about a file given where a frozen workload belongs (`-w`,
`freeze --check`)."""


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def read_meta(parquet: pq.ParquetFile, path: Path) -> dict[str, Any]:
    """The kvgate metadata of a workload file, the same in both of the footer's copies, of this
    schema_version and of the schema's shape; any defect is a one-line BadInput."""
    raw = (parquet.schema_arrow.metadata or {}).get(META_KEY)
    if raw is None:
        raise BadInput(
            f"workload {path} has no kvgate metadata, so it is not a frozen workload: a Parquet trace goes "
            f"into a suite's [[trace]] table (`kvgate init {path}` writes one), which "
            "`kvgate freeze SUITE.toml --model MODEL -o WORKLOAD.parquet` freezes"
        )
    if raw != (parquet.metadata.metadata or {}).get(META_KEY):
        raise BadInput(f"workload {path} has corrupt kvgate metadata (its two footer copies differ)")
    try:
        meta = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested thousands deep
        raise BadInput(f"workload {path} has corrupt kvgate metadata") from None
    if not isinstance(meta, dict):
        raise BadInput(f"workload {path} has corrupt kvgate metadata (not an object)")
    version = meta.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise BadInput(
            f"workload {path} has schema_version {version}; "
            f"this kvgate reads {SCHEMA_VERSION}: upgrade kvgate"
        )
    if version < SCHEMA_VERSION:
        raise BadInput(
            f"workload {path} has schema_version {version}, which has no migration; freeze it again"
        )
    check_meta(meta, f"workload {path}")
    missing = [c for c in (*FIXED_COLUMNS, *meta["slice_columns"]) if c not in parquet.schema_arrow.names]
    if missing:
        raise BadInput(f"workload {path} lacks column {missing[0]!r}")
    return meta


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def read_workload(path: Path) -> Workload:
    """Read and verify a workload; any defect is a one-line BadInput naming the file."""
    parquet, meta = open_workload(path)
    slice_columns = tuple(meta["slice_columns"])
    try:
        table = read_bounded(path, _stored_columns(parquet, slice_columns))
    except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:
        raise BadInput(f"workload {path} is not readable Parquet ({_first_line(exc)}): {REFREEZE}") from None
    if table.num_rows != meta["n_cases"]:
        raise BadInput(f"workload {path} has {table.num_rows} rows; its metadata says {meta['n_cases']}")
    try:
        token_ids = _token_tuples(table.column("prompt_token_ids"))
        rows = table.drop_columns(["prompt_token_ids"]).to_pylist()
        cases = tuple(_case(row, ids, slice_columns) for row, ids in zip(rows, token_ids, strict=True))
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError, pa.ArrowException) as exc:
        raise BadInput(f"workload {path} has a malformed row: {_first_line(exc)}") from None
    check_cases(cases, f"workload {path}")
    sha = content_sha256(cases, slice_columns)
    if sha != meta.get("content_sha256"):
        raise BadInput(f"workload {path} rows do not match its content sha256: it was changed after freezing")
    return Workload(cases=cases, meta=meta, sha256=sha, path=path)


def _stored_columns(parquet: pq.ParquetFile, slice_columns: tuple[str, ...]) -> list[str]:
    """The columns a case is read from: the fixed ones, the source id where stored, the slices."""
    own = (SOURCE_ID,) if SOURCE_ID in parquet.schema_arrow.names else ()
    return list(dict.fromkeys((*FIXED_COLUMNS, *own, *slice_columns)))


def stream_content_sha256(path: Path) -> tuple[str, dict[str, Any]]:
    """(the content sha256 of the workload's rows, its metadata), hashed batch by batch without building
    cases: what `read_workload` verifies, at a fraction of its memory."""
    parquet, meta = open_workload(path)
    slice_columns = tuple(meta["slice_columns"])
    digest, n = hashlib.sha256(), 0
    columns = _stored_columns(parquet, slice_columns)
    try:
        for batch in parquet.iter_batches(1024, columns=columns):
            for raw in batch.to_pylist():
                digest.update(_dumps(_stored_row(raw, slice_columns)).encode())
                digest.update(b"\n")
                n += 1
    except (OSError, TypeError, ValueError, KeyError, RecursionError, pa.ArrowException) as exc:
        raise BadInput(f"workload {path} has a malformed row: {_first_line(exc)}") from None
    if n != meta["n_cases"]:
        raise BadInput(f"workload {path} has {n} rows; its metadata says {meta['n_cases']}")
    return digest.hexdigest(), meta


def _stored_row(raw: dict[str, Any], slice_columns: tuple[str, ...]) -> dict[str, Any]:
    """A stored row as `_row` writes the case `_case` reads from it."""
    row = {k: raw[k] for k in FIXED_COLUMNS}
    row["messages"] = _dumps(list(json.loads(raw["messages"])))
    row["expected"] = _dumps(json.loads(raw["expected"]))
    row["validator_args"] = _dumps(json.loads(raw["validator_args"]))
    row["max_new_tokens"] = int(raw["max_new_tokens"])
    row["critical"] = bool(raw["critical"])
    if raw.get(SOURCE_ID) is not None:
        row[SOURCE_ID] = raw[SOURCE_ID]
    for col in slice_columns:
        row[col] = raw["task"] if col == "task" else raw[col]
    return row


def _token_tuples(column: pa.ChunkedArray) -> list[tuple[int, ...] | None]:
    """Each row's token ids as a tuple, or None. The tuples share one int object per distinct id, so a
    long-context workload held for a whole run costs a pointer per token rather than an int object."""
    array = column.combine_chunks()
    flat = to_numpy(array.flatten(), 0, np.int64)
    lengths = to_numpy(array.value_lengths(), 0, np.int64)
    valid = to_numpy(array.is_valid(), False, bool)
    shared = (
        list(range(int(flat.max()) + 1)) if len(flat) and 0 <= flat.min() <= flat.max() < MAX_VOCAB else None
    )
    out: list[tuple[int, ...] | None] = []
    start = 0
    for length, ok in zip(lengths.tolist(), valid.tolist(), strict=True):
        ids = flat[start : start + length].tolist()
        out.append(None if not ok else tuple(map(shared.__getitem__, ids)) if shared else tuple(ids))
        start += length
    return out


def _case(row: dict[str, Any], tokens: tuple[int, ...] | None, slice_columns: tuple[str, ...]) -> Case:
    return Case(
        case_id=row["case_id"],
        suite=row["suite"],
        task=row["task"],
        messages=tuple(json.loads(row["messages"])),
        max_new_tokens=int(row["max_new_tokens"]),
        validator=row["validator"],
        expected=json.loads(row["expected"]),
        validator_args=json.loads(row["validator_args"]),
        prefix_group=row["prefix_group"],
        critical=bool(row["critical"]),
        slices={c: row[c] for c in slice_columns if c != "task" and row[c] is not None},
        prompt_token_ids=tokens,
        n_prompt_tokens=row["n_prompt_tokens"],
        question_start=row["question_start"],
        source_id=row.get(SOURCE_ID),
    )
