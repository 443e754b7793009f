"""Tool-call match: the output's tool call must name the expected tool with exactly the expected
arguments.

``expected`` is ``{"name": str, "arguments": {...}}``. The call is the first JSON object in the output
(fenced, bare, or inside ``<tool_call>`` tags) of one of the shapes models emit:
``{"name", "arguments"}`` or ``{"name", "parameters"}``, OpenAI's ``{"function": {"name", "arguments"}}``
(arguments possibly a JSON string), or the first element of ``{"tool_calls": [...]}`` or of a list.
Arguments compare as JSON values: 3 equals 3.0, but true does not equal 1 and "3" does not equal 3.
No call at all is ``invalid``; a wrong name or argument is ``mismatch``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kvgate.validators.base import Verdict, refuse_args
from kvgate.validators.json_schema import iter_json


def as_call(value: Any) -> tuple[str, dict[str, Any]] | None:
    """(name, arguments) when `value` has the shape of a tool call, else None."""
    if isinstance(value, list):
        return as_call(value[0]) if value else None
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("tool_calls"), list):
        return as_call(value["tool_calls"])
    if isinstance(value.get("function"), dict):
        return as_call(value["function"])
    name = value.get("name")
    args = value.get("arguments", value.get("parameters"))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None
    if isinstance(name, str) and isinstance(args, dict):
        return name, args
    return None


def same_json(a: Any, b: Any) -> bool:
    """Equality of JSON values without Python's bool-is-int coercion."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _expected(expected: Any) -> tuple[str, dict[str, Any]]:
    if (
        not isinstance(expected, dict)
        or set(expected) != {"name", "arguments"}
        or not isinstance(expected["name"], str)
        or not isinstance(expected["arguments"], dict)
    ):
        raise ValueError(f'expected must be {{"name": str, "arguments": {{...}}}}, got {expected!r}')
    return expected["name"], expected["arguments"]


@dataclass(frozen=True)
class ToolCall:
    """Pass when the first tool call in the output has the expected name and arguments."""

    name: str

    def check_args(self, expected: Any, args: dict[str, Any]) -> None:
        _expected(expected)
        refuse_args(self.name, args)

    def __call__(self, output: str, expected: Any, args: dict[str, Any]) -> Verdict:
        want_name, want_args = _expected(expected)
        call = next((c for c in map(as_call, iter_json(output)) if c is not None), None)
        if call is None:
            return Verdict.fail("invalid", "no tool call in the output")
        name, got = call
        if name != want_name:
            return Verdict.fail("mismatch", f"called {name!r}, expected {want_name!r}")
        if not same_json(got, want_args):
            wrong = sorted(
                k
                for k in set(got) | set(want_args)
                if k not in got or k not in want_args or not same_json(got[k], want_args[k])
            )
            return Verdict.fail("mismatch", f"arguments differ at {', '.join(wrong)}")
        return Verdict.ok()
