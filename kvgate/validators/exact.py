"""Exact match after normalisation: case-folded, whitespace collapsed, punctuation stripped at both ends.

"  The Eiffel Tower. " matches "the eiffel tower"; "Paris, France" does not match "Paris". ``expected``
is a string or a list of acceptable strings (any one matches).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from kvgate.validators.base import StringsValidator, Verdict, expected_strings


def normalise(text: str) -> str:
    """Case-fold, collapse runs of whitespace, strip whitespace and punctuation (Unicode P*) at the ends."""
    text = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()
    start, end = 0, len(text)
    while start < end and (text[start].isspace() or unicodedata.category(text[start]).startswith("P")):
        start += 1
    while end > start and (text[end - 1].isspace() or unicodedata.category(text[end - 1]).startswith("P")):
        end -= 1
    return text[start:end]


@dataclass(frozen=True)
class Exact(StringsValidator):
    """Pass when the normalised output equals one of the normalised expected strings."""

    def __call__(self, output: str, expected: Any, args: dict[str, Any]) -> Verdict:
        got = normalise(output)
        if any(got == normalise(e) for e in expected_strings(expected)):
            return Verdict.ok()
        return Verdict.fail("mismatch", f"got {got[:60]!r}")
