"""All validators by name. Each module registers its validator here on import."""

from __future__ import annotations

from kvgate.registry import Registry
from kvgate.validators.base import Validator

VALIDATORS: Registry[Validator] = Registry("validator")


def get_validator(name: str) -> Validator:
    _load_builtin()
    return VALIDATORS.get(name)


def validator_names() -> list[str]:
    _load_builtin()
    return VALIDATORS.names()


def _load_builtin() -> None:
    from kvgate.validators import (  # noqa: F401  (each registers on import)
        exact,
        json_schema,
        python_tests,
        regex,
        substring,
        tool_call,
    )
