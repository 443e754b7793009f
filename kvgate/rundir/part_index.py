"""What binds result parts to their run: each part's metadata names its run and arm, and an index lists
every live part with its sha256 and row count.

    runs/<run_id>/results/index.json
        {"run_id": …, "parts": {"<arm>/part-NNNNN.parquet": {"sha256": …, "rows": …}, …}}

The index is rewritten atomically after every part is stored and after every merge (the merged part is
listed, the parts it covers dropped, before those are deleted). A part copied from another run or arm,
edited, added or removed after it was stored therefore shows: its binding or its checksum differs, or
the index and the folder disagree.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import jsonschema

from kvgate.bounded_file import load_json
from kvgate.errors import BadInput
from kvgate.treatments.matrix import MAX_ARM_CASES, MAX_CONFIRM_RERUNS
from kvgate.workload.schema import atomic_write

PART_KEY = b"kvgate.part"
"""Parquet metadata key of a part's binding: {"run_id", "arm"}."""
INDEX = "index.json"
MANIFEST = "manifest.json"
MAX_JSON_BYTES = 1 << 26
MAX_PART_ROWS = MAX_ARM_CASES * (1 + MAX_CONFIRM_RERUNS)
"""The most rows a part may hold: every generation one run may ask for, each re-run as often as it may be."""
"""Largest manifest or index kvgate reads (64 MiB; a million-row run's are under 1 MiB)."""


def binding(run_id: str | None, arm: str) -> dict[bytes, bytes]:
    """The Parquet metadata that binds a part to `run_id` and `arm`."""
    return {PART_KEY: json.dumps({"run_id": run_id, "arm": arm}, sort_keys=True).encode()}


def read_binding(metadata: dict[bytes, bytes] | None) -> dict[str, Any] | None:
    """The binding stored in a part's metadata, or None when it has none (or an unreadable one)."""
    raw = (metadata or {}).get(PART_KEY)
    try:
        value = json.loads(raw) if raw is not None else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def stored_run_id(run_dir: Path) -> str | None:
    """The run id the run's manifest declares (None without a readable manifest: a bare store)."""
    try:
        value = load_json(run_dir / MANIFEST, MAX_JSON_BYTES, "manifest").get("run_id")
    except (OSError, BadInput, AttributeError):
        return None
    return value if isinstance(value, str) else None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def index_path(results: Path) -> Path:
    return results / INDEX


def key_of(results: Path, part: Path) -> str:
    """The index key of `part`: its path relative to the results folder, "/"-separated."""
    return part.relative_to(results).as_posix()


INDEX_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["run_id", "parts"],
    "properties": {
        "run_id": {"type": ["string", "null"]},
        "parts": {
            "type": "object",
            "propertyNames": {
                "pattern": r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}/part-\d{5,}(-\d{5,})?\.parquet$"
            },
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "required": ["sha256", "rows"],
                "properties": {
                    "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                    "rows": {"type": "integer", "minimum": 0, "maximum": MAX_PART_ROWS},
                },
            },
        },
    },
}
"""Every field of the index, as `write_index` writes it: a part key is `<arm>/part-….parquet`."""


def read_index(results: Path, run_id: str | None = None) -> dict[str, dict[str, Any]]:
    """The index's parts (empty when there is no index yet); an index that does not fit INDEX_SCHEMA,
    or names another run than `run_id` (when given), is a BadInput naming the field."""
    path = index_path(results)
    try:
        data = load_json(path, MAX_JSON_BYTES, "result index")
    except FileNotFoundError:
        return {}
    error = None if plainly_valid(data) else jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(data))
    if error is not None:
        field = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise BadInput(f"result index {path} is malformed at {field}: {error.message[:120]}")
    parts: dict[str, dict[str, Any]] = data["parts"]
    if not all(_entry_ok(e) for e in parts.values()):
        raise BadInput(f"result index {path} is malformed: a row count is not an integer")
    if run_id is not None and data["run_id"] != run_id:
        raise BadInput(
            f"result index {path} belongs to run {data['run_id']!r}, not {run_id}: it was replaced"
        )
    return parts


def _entry_ok(entry: Any) -> bool:
    return isinstance(entry["rows"], int) and not isinstance(entry["rows"], bool)


_VALIDATOR = jsonschema.Draft202012Validator(INDEX_SCHEMA)
_PART_KEY = re.compile(INDEX_SCHEMA["properties"]["parts"]["propertyNames"]["pattern"])
_SHA256 = re.compile(
    INDEX_SCHEMA["properties"]["parts"]["additionalProperties"]["properties"]["sha256"]["pattern"]
)


def plainly_valid(data: Any) -> bool:
    """Whether `data` is an index as `write_index` writes it, checked field by field in one loop (a
    10⁶-row run's index lists ~1,000 parts: the schema's validator takes ~20 ms over them). True only for
    an index INDEX_SCHEMA accepts (its patterns searched as the validator searches them, a row count a
    plain int); anything else goes to the validator, which names the field."""
    if type(data) is not dict or data.keys() != {"run_id", "parts"}:
        return False
    run_id, parts = data["run_id"], data["parts"]
    if (run_id is not None and type(run_id) is not str) or type(parts) is not dict:
        return False
    for key, entry in parts.items():
        if type(entry) is not dict or entry.keys() != {"sha256", "rows"}:
            return False
        rows, sha256 = entry["rows"], entry["sha256"]
        if type(rows) is not int or not 0 <= rows <= MAX_PART_ROWS or type(sha256) is not str:
            return False
        if not _SHA256.search(sha256) or not _PART_KEY.search(key):
            return False
    return True


def write_index(results: Path, run_id: str | None, parts: dict[str, dict[str, Any]]) -> None:
    """Replace the index atomically."""
    text = json.dumps({"run_id": run_id, "parts": dict(sorted(parts.items()))}, indent=1) + "\n"
    atomic_write(index_path(results), lambda f: f.write(text.encode()))


def entry(path: Path, rows: int) -> dict[str, Any]:
    return {"sha256": file_sha256(path), "rows": rows}
