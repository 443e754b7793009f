"""Substring validators, case-insensitive, as RULER's `string_match_all` / `string_match_part`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvgate.validators.base import StringsValidator, Verdict, expected_strings


@dataclass(frozen=True)
class SubstringAll(StringsValidator):
    """Pass when every expected string occurs in the output (case-insensitive)."""

    def __call__(self, output: str, expected: Any, args: dict[str, Any]) -> Verdict:
        text = output.lower()
        missing = [n for n in expected_strings(expected) if n.lower() not in text]
        return Verdict.ok() if not missing else Verdict.fail("mismatch", f"missing {missing[0]!r}")


@dataclass(frozen=True)
class SubstringAny(StringsValidator):
    """Pass when at least one expected string occurs in the output (case-insensitive)."""

    def __call__(self, output: str, expected: Any, args: dict[str, Any]) -> Verdict:
        text = output.lower()
        if any(n.lower() in text for n in expected_strings(expected)):
            return Verdict.ok()
        return Verdict.fail("mismatch", "none of the expected strings")
