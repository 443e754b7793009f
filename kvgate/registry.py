"""Name → item registries with "did you mean" on unknown names, and lazy "module:Class" entries whose
module is imported only when the name is first asked for."""

from __future__ import annotations

import difflib
import importlib
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
    """An ordered mapping from names to items (factories or frozen specs). `lazy` names items by
    "module:Class"; the first `get` of such a name imports the module and keeps `Class()`."""

    def __init__(self, kind: str, lazy: dict[str, str] | None = None) -> None:
        self.kind = kind
        self._lazy = dict(lazy or {})
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        if name in self._items or name in self._lazy:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._items[name] = item
        return item

    def decorator(self, name: str) -> Callable[[T], T]:
        return lambda item: self.register(name, item)

    def get(self, name: str) -> T:
        if name not in self._items:
            if name not in self._lazy:
                raise unknown_name(self.kind, name, self.names())
            module, _, attr = self._lazy[name].partition(":")
            self._items[name] = getattr(importlib.import_module(module), attr)()
        return self._items[name]

    def names(self) -> list[str]:
        return list(dict.fromkeys([*self._lazy, *self._items]))

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
