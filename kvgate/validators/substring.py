"""Substring validators, case-insensitive, as RULER's `string_match_all` / `string_match_part`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvgate.validators.base import Verdict, expected_strings, refuse_args


@dataclass(frozen=True)
class SubstringAll:
    """Pass when every expected string occurs in the output (case-insensitive)."""

    name: str

    def check_args(self, expected: Any, args: dict[str, Any]) -> None:
        expected_strings(expected)
        refuse_args(self.name, args)

    def __call__(self, output: str, expected: Any, args: dict[str, Any]) -> Verdict:
        text = output.lower()
        missing = [n for n in expected_strings(expected) if n.lower() not in text]
        return Verdict.ok() if not missing else Verdict.fail("mismatch", f"missing {missing[0]!r}")


@dataclass(frozen=True)
class SubstringAny:
    """Pass when at least one expected string occurs in the output (case-insensitive)."""

    name: str

    def check_args(self, expected: Any, args: dict[str, Any]) -> None:
        expected_strings(expected)
        refuse_args(self.name, args)

    def __call__(self, output: str, expected: Any, args: dict[str, Any]) -> Verdict:
        text = output.lower()
        if any(n.lower() in text for n in expected_strings(expected)):
            return Verdict.ok()
        return Verdict.fail("mismatch", "none of the expected strings")
