"""JSON-schema validation of the first JSON object or array in the output (via `jsonschema`).

``expected`` is the schema (any draft `jsonschema` knows; ``$schema`` selects it, else 2020-12); formats
are checked. The JSON is looked for in a fenced code block first, then as the whole output, then at
each ``{`` or ``[`` in turn. No JSON at all is ``invalid``; JSON that breaks the schema is ``mismatch``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jsonschema

from kvgate.validators.base import Verdict, refuse_args

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)(?:```|$)", re.DOTALL)
_DECODER = json.JSONDecoder()


def iter_json(text: str) -> Iterator[Any]:
    """Every JSON object or array in `text`, fenced blocks first, then left to right; nested values
    inside a decoded one are not yielded again."""
    for block in _FENCE.findall(text):
        try:
            value = json.loads(block)
        except json.JSONDecodeError:
            continue
        yield value
    i = 0
    while i < len(text):
        starts = [j for j in (text.find("{", i), text.find("[", i)) if j >= 0]
        if not starts:
            return
        i = min(starts)
        try:
            value, end = _DECODER.raw_decode(text, i)
        except json.JSONDecodeError:
            i += 1
            continue
        yield value
        i = end


def first_json(text: str) -> Any:
    """The first JSON object or array in `text`; ValueError when there is none."""
    try:
        whole = json.loads(text.strip())
    except json.JSONDecodeError:
        pass
    else:
        if isinstance(whole, dict | list):
            return whole
    for value in iter_json(text):
        if isinstance(value, dict | list):
            return value
    raise ValueError("no JSON object or array in the output")


def _validator(schema: Any) -> Any:
    if not isinstance(schema, dict | bool):
        raise ValueError(f"expected must be a JSON schema (an object), got {schema!r}")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"invalid JSON schema: {exc.message}") from None
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@dataclass(frozen=True)
class JsonSchema:
    """Pass when the output's first JSON value satisfies the expected schema."""

    name: str

    def check_args(self, expected: Any, args: dict[str, Any]) -> None:
        _validator(expected)
        refuse_args(self.name, args)

    def __call__(self, output: str, expected: Any, args: dict[str, Any]) -> Verdict:
        try:
            value = first_json(output)
        except ValueError as exc:
            return Verdict.fail("invalid", str(exc))
        error = jsonschema.exceptions.best_match(_validator(expected).iter_errors(value))
        if error is None:
            return Verdict.ok()
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        return Verdict.fail("mismatch", f"{where}: {error.message[:120]}")
