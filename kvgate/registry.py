"""Name → item registries with "did you mean" on unknown names."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from kvgate.errors import BadInput

T = TypeVar("T")


def unknown_name(kind: str, name: str, known: list[str]) -> BadInput:
    """The one-line error for an unknown `name` of `kind`, suggesting the closest known names."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(sorted(known)) or 'none'}"
    return BadInput(f"unknown {kind} {name!r}{hint}")


class Registry(Generic[T]):
    """An ordered mapping from names to items (factories or frozen specs)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._items[name] = item
        return item

    def decorator(self, name: str) -> Callable[[T], T]:
        return lambda item: self.register(name, item)

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise unknown_name(self.kind, name, list(self._items)) from None

    def names(self) -> list[str]:
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)
