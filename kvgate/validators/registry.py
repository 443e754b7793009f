"""All validators by name, in one lazy table: a validator's module is imported when it is first asked
for (as `engines/registry.py` does for engines), so naming them all imports none."""

from __future__ import annotations

import functools
import importlib

from kvgate.registry import unknown_name
from kvgate.validators.base import Validator

VALIDATORS: dict[str, str] = {
    "exact": "kvgate.validators.exact:Exact",
    "json_schema": "kvgate.validators.json_schema:JsonSchema",
    "python_tests": "kvgate.validators.python_tests:PythonTests",
    "regex": "kvgate.validators.regex:Regex",
    "substring_all": "kvgate.validators.substring:SubstringAll",
    "substring_any": "kvgate.validators.substring:SubstringAny",
    "tool_call": "kvgate.validators.tool_call:ToolCall",
}
"""Name → "module:class"; the class is a frozen dataclass whose instance is the validator."""


@functools.cache
def get_validator(name: str) -> Validator:
    """The validator called `name` (one instance per name); an unknown name is a BadInput that
    suggests the closest one."""
    if name not in VALIDATORS:
        raise unknown_name("validator", name, list(VALIDATORS))
    module, _, attr = VALIDATORS[name].partition(":")
    validator: Validator = getattr(importlib.import_module(module), attr)()
    return validator


def validator_names() -> list[str]:
    return list(VALIDATORS)
