"""The manifest's JSON Schema: checked when the manifest is written and whenever it is read.

Bounds are the matrix's documented maxima; the policy text is checked by the policy parser itself, and
fields a later kvgate adds are allowed (identity fields are covered by the run id).
"""

from __future__ import annotations

from typing import Any

import jsonschema

from kvgate.engines.server.stack_version import STACK_VERSION_SCHEMA
from kvgate.errors import BadInput
from kvgate.names import NAME_PATTERN
from kvgate.rundir.hardware import MAX_NODES
from kvgate.seeds import MAX_SEED
from kvgate.treatments.matrix import (
    MAX_BATCH_SIZE,
    MAX_CONCURRENCY,
    MAX_CONFIRM_RERUNS,
    MAX_KV_BLOCKS,
    MAX_REPEAT,
)
from kvgate.workload.checks import MAX_CASES

HEX64 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
NAME = {"type": "string", "pattern": NAME_PATTERN}
ARM = {
    "type": "object",
    "required": ["spec", "fingerprint", "faults", "batch_size"],
    "properties": {
        "spec": {"type": "object", "required": ["kind", "name"]},
        "fingerprint": {"type": "string"},
        "faults": {"type": "object"},
        "batch_size": {"type": "integer", "minimum": 1, "maximum": MAX_BATCH_SIZE},
        "concurrency": {"type": "integer", "minimum": 1, "maximum": MAX_CONCURRENCY},
        "kv_blocks": {"type": "integer", "minimum": 1, "maximum": MAX_KV_BLOCKS},
        "abort_percent": {"type": "integer", "minimum": 1, "maximum": 100},
        "interleave": {"const": True},
        "resend_percent": {"type": "integer", "minimum": 1, "maximum": 100},
        "repeat": {"type": "integer", "minimum": 2, "maximum": MAX_REPEAT},
    },
}
RUN_ID_PATTERN = r"^([0-9]{8}T[0-9]{6}\.[0-9]{3}Z-)?[0-9a-f]{12}$"
"""`<UTC time>-<spec hash>`; a bare spec hash is a run made before run ids carried the time."""
HARDWARE = {
    "type": "object",
    "required": ["accelerator", "engine_build", "units", "nodes"],
    "properties": {
        "accelerator": {"type": "string", "minLength": 1},
        "engine_build": {"type": "string", "pattern": "^[0-9a-f]{16}$"},
        "units": {"type": "integer", "minimum": 0},
        "nodes": {"type": "array", "maxItems": MAX_NODES, "items": {"type": "string"}},
    },
}
"""A hardware kind an arm's work units ran on (rundir.hardware)."""
EXECUTOR = {
    "type": "object",
    "required": ["kind"],
    "properties": {
        "kind": NAME,  # an executor's name (kvgate.executors.registry)
        "address": {"type": ["string", "null"]},
        "workers": {"type": "integer", "minimum": 1},
        "max_tries": {"type": "integer", "minimum": 0},
        "worker_resources": {
            "type": "object",
            "properties": {
                "num_cpus": {"type": "number", "minimum": 0},
                "num_gpus": {"type": "number", "minimum": 0},
            },
        },
    },
}
"""The executor of the run's latest session (kvgate.executors)."""
REQUIRED = (
    "run_id", "workload_sha256", "model", "engine", "engine_options", "arms", "policy_sha256",
    "case_ids", "matrix", "workload_path", "n_cases", "limit", "policy_text",
)  # fmt: skip
MANIFEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": list(REQUIRED),
    "properties": {
        "run_id": {"type": "string", "pattern": RUN_ID_PATTERN},
        "workload_sha256": HEX64,
        "model": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
        "engine": {
            "type": "object",
            "required": ["engine"],
            "properties": {"engine": {"type": "string", "minLength": 1}},
        },
        "engine_options": {"type": "object"},
        "arms": {"type": "object", "minProperties": 1, "propertyNames": NAME, "additionalProperties": ARM},
        "policy_sha256": HEX64,
        "case_ids": HEX64,
        "matrix": {
            "type": "object",
            "required": ["control", "candidates", "aa_replicate", "confirm_reruns", "seed"],
            "properties": {
                "control": NAME,
                "candidates": {"type": "array", "uniqueItems": True, "items": NAME},
                "aa_replicate": {"type": "boolean"},
                "confirm_reruns": {"type": "integer", "minimum": 0, "maximum": MAX_CONFIRM_RERUNS},
                "seed": {"type": "integer", "minimum": 0, "maximum": MAX_SEED},
            },
        },
        "workload_path": {"type": "string", "minLength": 1},
        "workload_file_sha256": {"anyOf": [HEX64, {"type": "null"}]},
        "n_cases": {"type": "integer", "minimum": 1, "maximum": MAX_CASES},
        "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_CASES},
        "policy_text": {"type": "string"},
        "policy_unsafe_reason": {"type": ["string", "null"]},
        "matrix_name": {"type": "string"},
        "matrix_text": {"type": "string"},
        "created_at": {"type": "string"},
        "tokenizer": {"type": ["string", "null"]},
        "kvgate_version": {"type": "string"},
        "git_commit": {"type": ["string", "null"]},
        "host": {"type": "object"},
        "executor": EXECUTOR,
        "stack_version": STACK_VERSION_SCHEMA,
        "hardware": {
            "type": "object",
            "propertyNames": NAME,
            "additionalProperties": {"type": "array", "items": HARDWARE},
        },
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(MANIFEST_SCHEMA)


def check_manifest_shape(manifest: Any, where: str) -> None:
    """A one-line BadInput naming the first field of `manifest` that does not fit the schema."""
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(manifest))
    if error is None:
        return
    field = "/".join(str(p) for p in error.absolute_path) or "(top level)"
    message = error.message if len(error.message) <= 120 else error.message[:117] + "…"
    raise BadInput(f"{where} is malformed at {field}: {message}")
