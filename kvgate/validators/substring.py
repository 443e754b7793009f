"""Substring validators, case-insensitive, as RULER's `string_match_all` / `string_match_part`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvgate.validators.base import Verdict
from kvgate.validators.registry import VALIDATORS


def _needles(expected: Any) -> list[str]:
    if isinstance(expected, str):
        return [expected]
    if isinstance(expected, list) and expected and all(isinstance(e, str) for e in expected):
        return expected
    raise ValueError(f"expected must be a string or a non-empty list of strings, got {expected!r}")


@dataclass(frozen=True)
class SubstringAll:
    """Pass when every expected string occurs in the output (case-insensitive)."""

    name: str = "substring_all"

    def check_args(self, expected: Any, args: dict[str, Any]) -> None:
        _needles(expected)
        if args:
            raise ValueError(f"{self.name} takes no arguments, got {sorted(args)}")

    def __call__(self, output: str, expected: Any, args: dict[str, Any]) -> Verdict:
        text = output.lower()
        missing = [n for n in _needles(expected) if n.lower() not in text]
        return Verdict.ok() if not missing else Verdict.fail("mismatch", f"missing {missing[0]!r}")


@dataclass(frozen=True)
class SubstringAny:
    """Pass when at least one expected string occurs in the output (case-insensitive)."""

    name: str = "substring_any"

    def check_args(self, expected: Any, args: dict[str, Any]) -> None:
        _needles(expected)
        if args:
            raise ValueError(f"{self.name} takes no arguments, got {sorted(args)}")

    def __call__(self, output: str, expected: Any, args: dict[str, Any]) -> Verdict:
        text = output.lower()
        if any(n.lower() in text for n in _needles(expected)):
            return Verdict.ok()
        return Verdict.fail("mismatch", "none of the expected strings")


VALIDATORS.register("substring_all", SubstringAll())
VALIDATORS.register("substring_any", SubstringAny())
