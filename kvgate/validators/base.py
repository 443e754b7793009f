"""The validator seam: judge one output against the case's expectation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

FailKind = Literal["mismatch", "invalid", "engine_error", "timeout"]


@dataclass(frozen=True)
class Verdict:
    """`passed`; when not, `fail_kind` says why (docs/reference.md, "Result parts") and `detail` in a few
    words."""

    passed: bool
    fail_kind: FailKind | None = None
    detail: str = ""

    @staticmethod
    def ok() -> Verdict:
        return Verdict(True)

    @staticmethod
    def fail(kind: FailKind, detail: str = "") -> Verdict:
        return Verdict(False, kind, detail)


class Validator(Protocol):
    """A named judge. `check_args` raises ValueError on bad `expected`/`args` at freeze time."""

    @property
    def name(self) -> str:
        """Its key in the registry, which builds it with that name (the name's one statement)."""
        ...

    def check_args(self, expected: Any, args: dict[str, Any]) -> None: ...

    def __call__(self, output: str, expected: Any, args: dict[str, Any]) -> Verdict: ...


def expected_strings(expected: Any) -> list[str]:
    """`expected` as the acceptable strings: one string, or a non-empty list of them."""
    if isinstance(expected, str):
        return [expected]
    if isinstance(expected, list) and expected and all(isinstance(e, str) for e in expected):
        return expected
    raise ValueError(f"expected must be a string or a non-empty list of strings, got {expected!r}")


def refuse_args(name: str, args: dict[str, Any]) -> None:
    """`check_args` of a validator that takes no arguments."""
    if args:
        raise ValueError(f"{name} takes no arguments, got {sorted(args)}")


@dataclass(frozen=True)
class StringsValidator:
    """Base of the validators whose `expected` is one string or a list of them and that take no
    arguments: only the verdict (`__call__`) differs."""

    name: str

    def check_args(self, expected: Any, args: dict[str, Any]) -> None:
        expected_strings(expected)
        refuse_args(self.name, args)
