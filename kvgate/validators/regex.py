"""Regular-expression match: ``expected`` is a Python `re` pattern.

Arguments: ``fullmatch`` (bool, default false: the pattern must match the whole stripped output rather
than anywhere in it) and ``ignore_case`` (bool, default false).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kvgate.validators.base import Verdict

_ARGS = {"fullmatch", "ignore_case"}


def _compile(expected: Any, args: dict[str, Any]) -> re.Pattern[str]:
    if not isinstance(expected, str):
        raise ValueError(f"expected must be a regular expression string, got {expected!r}")
    unknown = sorted(set(args) - _ARGS)
    if unknown:
        raise ValueError(f"unknown argument {unknown[0]!r}; known: {', '.join(sorted(_ARGS))}")
    for key in _ARGS & set(args):
        if not isinstance(args[key], bool):
            raise ValueError(f"argument {key!r} must be true or false, got {args[key]!r}")
    try:
        return re.compile(expected, re.IGNORECASE if args.get("ignore_case") else 0)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {expected!r}: {exc}") from None


@dataclass(frozen=True)
class Regex:
    """Pass when the pattern is found in the output (or matches all of it, with ``fullmatch``)."""

    name: str

    def check_args(self, expected: Any, args: dict[str, Any]) -> None:
        _compile(expected, args)

    def __call__(self, output: str, expected: Any, args: dict[str, Any]) -> Verdict:
        pattern = _compile(expected, args)
        found = pattern.fullmatch(output.strip()) if args.get("fullmatch") else pattern.search(output)
        return Verdict.ok() if found else Verdict.fail("mismatch", f"no match for {expected!r}")
