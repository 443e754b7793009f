"""A result part's format and its one reader: the columns of each schema version and one upgrade path.

A part is a Parquet file of RESULT_SCHEMA rows (one per (arm, replicate, case, attempt)); its metadata
declares the version it was written in under RESULT_VERSION_KEY (version 1 declares none). Every reader
of a part (the store, the report) goes through `read_part`: page checksums verified, the declared version
checked, and an older part upgraded by adding the columns later versions brought, null.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kvgate.errors import BadInput
from kvgate.rundir.footer_values import stated_columns

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
        ("certificate_bound_max", pa.float64()),
        ("certificate_bound_mean", pa.float64()),
        ("certificate_estimate_mean", pa.float64()),
        ("certificate_relative_bound_mean", pa.float64()),
        ("certificate_relative_estimate_mean", pa.float64()),
        ("certificate_cap_share", pa.float64()),
        ("kv_bytes", pa.int64()),
        ("kv_dtype", pa.string()),
        ("n_kv_quantized", pa.int32()),
        ("n_tier_written", pa.int32()),
        ("n_tier_read", pa.int32()),
        ("n_spans_reused", pa.int32()),
    ]
)
RESULT_SCHEMA_VERSION = 4
"""Stored in every part's metadata under RESULT_VERSION_KEY. Version 2 added the certificate columns,
version 3 the relative ones (CERTIFICATE_DRIFT_COLUMNS), version 4 the proof-of-treatment columns
(PROOF_COLUMNS)."""
RESULT_VERSION_KEY = b"kvgate.result_schema_version"
CERTIFICATE_DRIFT_COLUMNS = (
    "certificate_relative_bound_mean",
    "certificate_relative_estimate_mean",
    "certificate_cap_share",
)
CERTIFICATE_COLUMNS = (
    "certificate_bound_max",
    "certificate_bound_mean",
    "certificate_estimate_mean",
    *CERTIFICATE_DRIFT_COLUMNS,
)
PROOF_COLUMNS = ("kv_bytes", "kv_dtype", "n_kv_quantized", "n_tier_written", "n_tier_read", "n_spans_reused")
"""The engine's evidence that the treatment ran (engines.base.Generation; analysis.proof reads them)."""
RESULT_SCHEMA_V3 = pa.schema([f for f in RESULT_SCHEMA if f.name not in PROOF_COLUMNS])
RESULT_SCHEMA_V2 = pa.schema([f for f in RESULT_SCHEMA_V3 if f.name not in CERTIFICATE_DRIFT_COLUMNS])
RESULT_SCHEMA_V1 = pa.schema([f for f in RESULT_SCHEMA_V3 if f.name not in CERTIFICATE_COLUMNS])
SCHEMAS = {1: RESULT_SCHEMA_V1, 2: RESULT_SCHEMA_V2, 3: RESULT_SCHEMA_V3, 4: RESULT_SCHEMA}
"""Each version's columns, in the order it stores them."""
NAMES = {version: frozenset(schema.names) for version, schema in SCHEMAS.items()}

BytesCheck = Callable[[Path, bytes, "dict[bytes, bytes] | None", int], None]
"""Called with a part's path, its bytes, its metadata and its row count (from the footer) before its rows
are read (rundir.integrity's check against the run's index and binding), so that checking and reading
open the part, and parse its footer, once."""


def read_part(
    path: Path,
    columns: Sequence[str] | None = None,
    *,
    dictionary: Sequence[str] = (),
    check: BytesCheck | None = None,
) -> pa.Table:
    """The rows of one part in RESULT_SCHEMA's current columns (`columns` of them, in that order), an older
    version's missing columns null; the part's metadata is kept.

    Columns named in `dictionary` are read dictionary-encoded (few distinct values: `arm`, `fail_kind`).
    Reading every column verifies every page checksum; reading some verifies theirs. With `check`, the
    whole file's sha256 is checked too, and a column whose values the verified footer states (all null,
    or one exact value: rundir.footer_values) is built from it, its pages not decoded. A corrupt part,
    one not of its declared version's schema, or one declaring an unknown version is a BadInput naming
    it.
    """
    wanted = list(RESULT_SCHEMA.names if columns is None else columns)
    try:
        source: Path | pa.BufferReader = path
        if check is not None:
            data = path.read_bytes()
            source = pa.BufferReader(data)
        with pq.ParquetFile(
            source,
            page_checksum_verification=True,
            read_dictionary=list(dictionary) or None,
            pre_buffer=check is None,  # bytes in memory: nothing to gather ahead
        ) as part:
            schema = part.schema_arrow
            metadata = schema.metadata
            if check is not None:
                check(path, data, metadata, part.metadata.num_rows)
            version = stored_version(schema, path, dictionary)
            have = [c for c in wanted if c in NAMES[version]]
            stated = stated_columns(part.metadata, schema, have) if check is not None else {}
            table = part.read(columns=[c for c in have if c not in stated], use_threads=False)
        if stated:
            table = with_columns(table, stated, have, schema)
    except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:  # the last: a garbled column name
        lines = str(exc).splitlines() or [type(exc).__name__]
        raise BadInput(
            f"result part {path} is corrupt ({lines[0]}); delete it and `--resume` to regenerate its rows"
        ) from None
    if table.column_names == wanted:  # the current version's part: its columns and metadata as read
        return table
    return upgrade(table, wanted).replace_schema_metadata(metadata)


def with_columns(
    table: pa.Table, stated: dict[str, pa.Array], names: list[str], schema: pa.Schema
) -> pa.Table:
    """`table` (the columns read) and the `stated` ones, in the order of `names`, each of its type in
    `schema`; the part's metadata kept."""
    arrays = [stated[name] if name in stated else table[name] for name in names]
    return pa.Table.from_arrays(arrays, schema=_selected(schema, names))


SELECTED_MAX = 16
_selected_schemas: list[tuple[pa.Schema, tuple[str, ...], pa.Schema]] = []
"""(a part's schema as read, the columns asked for, those columns' schema with its metadata): the parts
of a run share a few, so each part after the first finds its columns' schema by one comparison."""


def _selected(schema: pa.Schema, names: Sequence[str]) -> pa.Schema:
    """The fields `names` of `schema`, in that order, with `schema`'s metadata."""
    asked = tuple(names)
    for seen, seen_names, selected in _selected_schemas:
        if seen_names == asked and schema.equals(seen, check_metadata=True):
            return selected
    selected = pa.schema([schema.field(name) for name in names], metadata=schema.metadata)
    if len(_selected_schemas) < SELECTED_MAX:
        _selected_schemas.append((schema, asked, selected))
    return selected


SEEN_SCHEMAS_MAX = 16
_seen_schemas: list[tuple[pa.Schema, int | None, tuple[str, ...], int]] = []
"""(schema as read, declared version, dictionary columns, its version): the parts of a run share a few
schemas, so each part after the first is matched by one comparison instead of its fields rebuilt."""


def stored_version(schema: pa.Schema, path: Path, dictionary: Sequence[str] = ()) -> int:
    """The version whose columns a part has: the one it declares (a part declaring none is read by its
    columns, as version 1 parts are); an unknown or newer declaration, or columns that are not that
    version's, is a BadInput, never read as another version."""
    declared = _declared_version(schema.metadata, path)
    read_as = tuple(dictionary)
    for seen, seen_declared, seen_read_as, version in _seen_schemas:
        if (
            seen_declared == declared
            and seen_read_as == read_as
            and schema.equals(seen, check_metadata=False)
        ):
            return version
    plain = pa.schema([f.with_type(f.type.value_type) if f.name in dictionary else f for f in schema])
    candidates = [declared] if declared is not None else list(SCHEMAS)
    for version in candidates:
        if plain.equals(SCHEMAS[version], check_metadata=False):
            if len(_seen_schemas) < SEEN_SCHEMAS_MAX:
                _seen_schemas.append((schema, declared, read_as, version))
            return version
    raise BadInput(f"result part {path} does not have the result schema (version {declared or 'any'})")


def _declared_version(metadata: dict[bytes, bytes] | None, path: Path) -> int | None:
    raw = (metadata or {}).get(RESULT_VERSION_KEY)
    if raw is None:
        return None
    text = raw.decode("ascii", "replace")
    if not text.isdigit() or int(text) not in SCHEMAS:
        raise BadInput(
            f"result part {path} declares result schema version {text[:20]!r}; this kvgate reads 1 to "
            f"{RESULT_SCHEMA_VERSION}: report it with the kvgate that wrote it (or a newer one)"
        )
    return int(text)


def upgrade(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """`columns` of `table` in that order; a column its version lacks (added later) is null."""
    have = set(table.column_names)
    for name in columns:
        if name not in have:
            field = RESULT_SCHEMA.field(name)
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    return table.select(list(columns))
