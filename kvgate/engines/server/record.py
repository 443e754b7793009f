"""The record a served or scheduled pass leaves in its run directory: how it was served, what it counted.

    <run_dir>/server/<arm>.r<replicate>.a<attempt>.<session>.json    this record
    <run_dir>/server/<arm>.r<replicate>.a<attempt>.<session>.log     a launched server's output

A resumed pass is a new session with records of its own. One JSON Schema, checked when a record is
written and when it is read: `form` is "launched" or "endpoint" (the server engine), or "in-process" (an
engine without a server that ran a stress schedule: the fake engine); `preemptions` is the rise of the
server's preemption counter over the pass (None: not reported); `retried` maps each case that needed
more than one attempt to its attempt count; `timeouts` counts the cases that ran past the time limit;
`load` is the arm's declared load (the matrix's), and the stress schedules' counts
(`engines/schedule.py`: aborts, interleaved, churned, resent, resend_changed, repeats,
repeat_changed) stand beside the others. `cached_tokens_total`, for a flavour whose server counts
them (llama-server's `llamacpp:prompt_tokens_cached_total`), is the rise of the prompt tokens it served
from a cache over the pass, every request counted (None: not reported). `stack_version`: the version
the server named for itself (`stack_version.py`; absent from older records).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from kvgate.bounded_file import load_json
from kvgate.contained import check_contained
from kvgate.engines.server.stack_version import STACK_VERSION_SCHEMA
from kvgate.errors import BadInput
from kvgate.workload.schema import atomic_write

FOLDER = "server"
MAX_RECORD_BYTES = 1 << 24
SCHEMA_ID = "kvgate.server-pass/1"
COUNT = {"type": "integer", "minimum": 0}
SCHEDULE_COUNTS = ("interleaved", "churned", "resent", "resend_changed", "repeats", "repeat_changed")
"""The stress schedules' counts beside `aborts` (`engines/schedule.py`; absent from older records)."""
RECORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "schema",
        "arm",
        "replicate",
        "attempt",
        "session",
        "form",
        "url",
        "concurrency",
        "kv_blocks",
        "requests",
        "retried",
        "timeouts",
        "preemptions",
        "wall_s",
    ],
    "properties": {
        "schema": {"const": SCHEMA_ID},
        "arm": {"type": "string", "minLength": 1},
        "replicate": COUNT,
        "attempt": COUNT,
        "session": COUNT,
        "form": {"enum": ["launched", "endpoint", "in-process"]},
        "url": {"type": "string"},
        "command": {"type": "array", "items": {"type": "string"}},
        "log": {"type": "string"},
        "concurrency": {"type": "integer", "minimum": 1},
        "kv_blocks": {"type": ["integer", "null"], "minimum": 1},
        "requests": COUNT,
        "retried": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 2}},
        "timeouts": COUNT,
        "preemptions": {"type": ["integer", "null"], "minimum": 0},
        "aborts": COUNT,
        "cached_tokens_total": {"type": ["integer", "null"]},
        "stack_version": STACK_VERSION_SCHEMA,
        **{key: COUNT for key in SCHEDULE_COUNTS},
        "load": {"type": "object"},
        "wall_s": {"type": "number", "minimum": 0},
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(RECORD_SCHEMA)


def pass_stem(arm: str, replicate: int, attempt: int, session: int) -> str:
    return f"{arm}.r{replicate}.a{attempt}.{session}"


def next_session(run_dir: Path, arm: str, replicate: int, attempt: int) -> int:
    """The first session number of this pass without a log or a record yet."""
    folder = run_dir / FOLDER
    session = 0
    while any(
        (folder / f"{pass_stem(arm, replicate, attempt, session)}{ext}").exists() for ext in (".json", ".log")
    ):
        session += 1
    return session


def check_record(record: Any, where: str) -> None:
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(record))
    if error is not None:
        field = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise BadInput(f"{where} is malformed at {field}: {error.message[:120]}")


def write_record(run_dir: Path, record: dict[str, Any]) -> Path:
    stem = pass_stem(record["arm"], record["replicate"], record["attempt"], record["session"])
    path = run_dir / FOLDER / f"{stem}.json"
    check_record(record, str(path))
    check_contained(run_dir, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()
    atomic_write(path, lambda f: f.write(data))
    return path


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    """Every pass record of the run, checked, in file-name order (none when the run used no server)."""
    folder = run_dir / FOLDER
    if not folder.is_dir():
        return []
    records = []
    for path in sorted(folder.glob("*.json")):
        try:
            record = load_json(path, MAX_RECORD_BYTES, "server pass record")
        except FileNotFoundError:
            raise BadInput(f"server pass record {path} vanished while the run was read") from None
        check_record(record, f"server pass record {path}")
        records.append(record)
    return records


COUNTED = ("requests", "timeouts", "preemptions", "aborts", *SCHEDULE_COUNTS)
"""What `first_pass_counts` sums per arm."""


def first_pass_counts(run_dir: Path) -> dict[str, dict[str, int | None]]:
    """Per arm, what its first pass's records counted (replicate 0, attempt 0, summed over sessions):
    requests, timeouts, preemptions (None: not reported), aborts and the schedules' counts."""
    total: dict[str, dict[str, int | None]] = {}
    for record in read_records(run_dir):
        if record["replicate"] or record["attempt"]:
            continue
        seen = total.setdefault(record["arm"], {key: 0 for key in COUNTED} | {"preemptions": None})
        for key in COUNTED:
            value = record.get(key, 0)
            if value is not None:
                seen[key] = (seen[key] or 0) + value
    return total
