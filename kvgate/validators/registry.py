"""All validators by name, in one lazy table (`kvgate.registry.Registry`, as every plug-in kind): a
validator's module is imported when it is first asked for, so naming them all imports none."""

from __future__ import annotations

from kvgate.registry import Registry
from kvgate.validators.base import Validator

VALIDATORS: Registry[Validator] = Registry(
    "validator",
    lazy={
        "exact": "kvgate.validators.exact:Exact",
        "json_schema": "kvgate.validators.json_schema:JsonSchema",
        "python_tests": "kvgate.validators.python_tests:PythonTests",
        "regex": "kvgate.validators.regex:Regex",
        "substring_all": "kvgate.validators.substring:SubstringAll",
        "substring_any": "kvgate.validators.substring:SubstringAny",
        "tool_call": "kvgate.validators.tool_call:ToolCall",
    },
)
"""Name → "module:class"; the class is a frozen dataclass whose instance (built with its name) is the
validator."""


def get_validator(name: str) -> Validator:
    """The validator called `name` (one instance per name); an unknown name is a BadInput that
    suggests the closest one."""
    return VALIDATORS[name]


def validator_names() -> list[str]:
    return VALIDATORS.names()
