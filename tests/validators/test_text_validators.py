"""exact, regex, json_schema and tool_call through the registry, on positive and negative outputs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvgate.errors import BadInput
from kvgate.validators.registry import get_validator, validator_names


def check(
    name: str, output: str, expected: Any, args: dict[str, Any] | None = None
) -> tuple[bool, str | None]:
    validator = get_validator(name)
    validator.check_args(expected, args or {})
    verdict = validator(output, expected, args or {})
    assert verdict.passed == (verdict.fail_kind is None)
    return verdict.passed, verdict.fail_kind


def test_all_validators_are_registered() -> None:
    names = set(validator_names())
    assert {"exact", "regex", "json_schema", "tool_call", "python_tests", "substring_all"} <= names
    with pytest.raises(BadInput, match="did you mean 'json_schema'"):
        get_validator("json_schemas")
    assert all(get_validator(name).name == name for name in names)  # the table and the classes agree


# --- exact ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output",
    ["Paris", "paris", "  PARIS.  ", '"Paris"', "Paris!\n", "«Paris»", "(Paris)"],
)
def test_exact_normalises_case_whitespace_and_end_punctuation(output: str) -> None:
    assert check("exact", output, "Paris") == (True, None)


@pytest.mark.parametrize("output", ["Paris, France", "It is Paris", "Pa ris", ""])
def test_exact_rejects_anything_else(output: str) -> None:
    assert check("exact", output, "Paris") == (False, "mismatch")


def test_exact_inner_whitespace_and_alternatives() -> None:
    assert check("exact", "New   York\nCity", "new york city")[0]
    assert check("exact", "NYC", ["New York City", "NYC"])[0]
    assert check("exact", "3.14", "3.14")[0]  # only the ends are stripped


@pytest.mark.parametrize(("expected", "args"), [(3, {}), ([], {}), ("x", {"case": True})])
def test_exact_bad_arguments(expected: Any, args: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        get_validator("exact").check_args(expected, args)


# --- regex ----------------------------------------------------------------------------------------------


def test_regex_search_fullmatch_and_case() -> None:
    assert check("regex", "The answer is 42.", r"\b42\b") == (True, None)
    assert check("regex", "The answer is 421.", r"\b42\b") == (False, "mismatch")
    assert check("regex", " 42 ", r"\d+", {"fullmatch": True})[0]
    assert not check("regex", "42 apples", r"\d+", {"fullmatch": True})[0]
    assert not check("regex", "YES", "yes")[0]
    assert check("regex", "YES", "yes", {"ignore_case": True})[0]


@pytest.mark.parametrize(
    ("expected", "args"), [("(unclosed", {}), (42, {}), ("x", {"flags": "i"}), ("x", {"fullmatch": "yes"})]
)
def test_regex_bad_arguments(expected: Any, args: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        get_validator("regex").check_args(expected, args)


# --- json_schema ----------------------------------------------------------------------------------------

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "output",
    [
        '{"name": "Ada", "age": 36}',
        'Sure! Here it is: {"name": "Ada", "age": 36} Hope that helps.',
        'Here:\n```json\n{"name": "Ada",\n "age": 36}\n```',
        'Note {braces} first, then {"name": "Ada", "age": 36}',
        '```json\n{"name": "Ada", "age": 36}',  # cut off before the closing fence
    ],
)
def test_json_schema_finds_the_json(output: str) -> None:
    assert check("json_schema", output, PERSON) == (True, None)


@pytest.mark.parametrize(
    "output",
    [
        '{"name": "Ada", "age": -1}',
        '{"name": "Ada"}',
        '{"name": "Ada", "age": 36, "x": 1}',
        '{"name": 1, "age": 2}',
    ],
)
def test_json_schema_mismatch(output: str) -> None:
    assert check("json_schema", output, PERSON) == (False, "mismatch")


@pytest.mark.parametrize("output", ["", "no json here", '{"name": "Ada", "age": ', '"just a string"'])
def test_json_schema_invalid_when_nothing_parses(output: str) -> None:
    assert check("json_schema", output, PERSON) == (False, "invalid")


def test_json_schema_arrays_and_formats() -> None:
    schema = {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1}
    assert check("json_schema", 'Emails: ["a@example.com"]', schema)[0]
    assert check("json_schema", '["not an email"]', schema) == (False, "mismatch")


@pytest.mark.parametrize("schema", ["not a schema", {"type": "no-such-type"}, {"minimum": "zero"}])
def test_json_schema_bad_schema(schema: Any) -> None:
    with pytest.raises(ValueError):
        get_validator("json_schema").check_args(schema, {})


# --- tool_call ------------------------------------------------------------------------------------------

CALL = {
    "name": "convert_currency",
    "arguments": {"amount": 250, "from_currency": "EUR", "to_currency": "JPY"},
}


@pytest.mark.parametrize(
    "output",
    [
        json.dumps(CALL),
        f"<tool_call>\n{json.dumps(CALL)}\n</tool_call>",
        f"I will convert it.\n```json\n{json.dumps(CALL)}\n```",
        json.dumps({"name": CALL["name"], "parameters": {**CALL["arguments"], "amount": 250.0}}),
        json.dumps(
            {
                "type": "function",
                "function": {"name": CALL["name"], "arguments": json.dumps(CALL["arguments"])},
            }
        ),
        json.dumps(
            {"tool_calls": [{"id": "c1", "function": {"name": CALL["name"], "arguments": CALL["arguments"]}}]}
        ),
        json.dumps([CALL]),
    ],
)
def test_tool_call_shapes(output: str) -> None:
    assert check("tool_call", output, CALL) == (True, None)


@pytest.mark.parametrize(
    "call",
    [
        {"name": "get_weather", "arguments": CALL["arguments"]},
        {"name": CALL["name"], "arguments": {**CALL["arguments"], "amount": 25}},
        {"name": CALL["name"], "arguments": {**CALL["arguments"], "amount": "250"}},
        {"name": CALL["name"], "arguments": {**CALL["arguments"], "extra": True}},
        {"name": CALL["name"], "arguments": {"amount": 250, "from_currency": "EUR"}},
        {"name": CALL["name"], "arguments": {**CALL["arguments"], "to_currency": "jpy"}},
    ],
)
def test_tool_call_mismatch(call: dict[str, Any]) -> None:
    assert check("tool_call", json.dumps(call), CALL) == (False, "mismatch")


def test_tool_call_bool_is_not_a_number() -> None:
    expected = {"name": "f", "arguments": {"flag": True, "n": 1}}
    assert check("tool_call", '{"name": "f", "arguments": {"flag": true, "n": 1.0}}', expected)[0]
    assert not check("tool_call", '{"name": "f", "arguments": {"flag": 1, "n": 1}}', expected)[0]


@pytest.mark.parametrize("output", ["", "I cannot help with that.", '{"result": 5}', '{"name": "f"}'])
def test_tool_call_invalid_without_a_call(output: str) -> None:
    assert check("tool_call", output, CALL) == (False, "invalid")


@pytest.mark.parametrize(
    "expected", [{"name": "f"}, {"name": 3, "arguments": {}}, {"name": "f", "arguments": []}]
)
def test_tool_call_bad_expected(expected: Any) -> None:
    with pytest.raises(ValueError):
        get_validator("tool_call").check_args(expected, {})
