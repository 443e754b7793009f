"""Checks every workload passes, at freezing and at reading alike: its metadata's shape and its rows.

Metadata is checked against `META_SCHEMA` (JSON Schema); rows must be at least one, with unique non-empty
case ids, 1 ≤ max_new_tokens ≤ MAX_NEW_TOKENS and a chat message list; a run also needs known validators.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jsonschema

from kvgate.errors import BadInput
from kvgate.names import NAME_PATTERN
from kvgate.seeds import MAX_SEED
from kvgate.workload.case import Case

MAX_NEW_TOKENS = 65_536
MAX_CASES = 10_000_000
META_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["schema_version", "slice_columns", "n_cases", "content_sha256"],
    "properties": {
        "schema_version": {"type": "integer"},
        "slice_columns": {
            "type": "array",
            "uniqueItems": True,
            "items": {"type": "string", "pattern": NAME_PATTERN},
        },
        "n_cases": {"type": "integer", "minimum": 1, "maximum": MAX_CASES},
        "content_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "tokenizer": {"type": ["string", "null"]},
        "seed": {"type": "integer", "minimum": 0, "maximum": MAX_SEED},
        "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_CASES},
    },
}
_META = jsonschema.Draft202012Validator(META_SCHEMA)


def check_meta(meta: Any, where: str) -> None:
    """A one-line BadInput naming the first metadata field that does not fit `META_SCHEMA`."""
    error = jsonschema.exceptions.best_match(_META.iter_errors(meta))
    if error is not None:
        field = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise BadInput(f"{where}: kvgate metadata is malformed at {field}: {error.message[:120]}")


def check_validators(cases: Sequence[Case], where: str) -> None:
    """Every case names a validator this kvgate has (checked before a run generates anything)."""
    from kvgate.validators.registry import validator_names

    known = set(validator_names())
    for case in cases:
        if case.validator not in known:
            raise BadInput(f"{where}: case {case.case_id!r} names unknown validator {case.validator!r}")


def check_cases(cases: Sequence[Case], where: str) -> None:
    """Rows a workload may hold: a one-line BadInput naming the first case that may not be run."""
    if not cases:
        raise BadInput(f"{where}: the workload has no cases")
    seen: set[str] = set()
    for case in cases:
        if not isinstance(case.case_id, str) or not case.case_id:
            raise BadInput(f"{where}: a case has an empty case_id")
        if case.case_id in seen:
            raise BadInput(f"{where}: duplicate case_id {case.case_id!r} in the workload")
        seen.add(case.case_id)
        if not 1 <= case.max_new_tokens <= MAX_NEW_TOKENS:
            raise BadInput(
                f"{where}: case {case.case_id!r} has max_new_tokens {case.max_new_tokens}, "
                f"not in [1, {MAX_NEW_TOKENS}]"
            )
        if not case.messages or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) for m in case.messages
        ):
            raise BadInput(f"{where}: case {case.case_id!r} has messages that are not chat messages")
        _check_tokens(case, where)


MAX_TOKEN_ID = (1 << 31) - 1


def _check_tokens(case: Any, where: str) -> None:
    """Token ids in [0, 2^31), as many as `n_prompt_tokens` says, and `question_start` inside them."""
    ids, n, start = case.prompt_token_ids, case.n_prompt_tokens, case.question_start
    here = f"{where}: case {case.case_id!r}"
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise BadInput(f"{here} has n_prompt_tokens {n!r}, not a count")
    if ids is not None:
        if n is not None and len(ids) != n:
            raise BadInput(f"{here} has {len(ids)} token ids but n_prompt_tokens {n}")
        if ids and not 0 <= min(ids) <= max(ids) <= MAX_TOKEN_ID:
            raise BadInput(f"{here} has a token id outside [0, 2^31)")
    known = n if n is not None else None if ids is None else len(ids)
    if start is not None and known is not None and not 0 <= start <= known:
        raise BadInput(f"{here} has question_start {start}, outside its prompt")
