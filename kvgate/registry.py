"""The one idiom of kvgate's plug-in tables (engines, eviction methods, validators, generators, server
flavours, report formats, executors): a `Registry` whose keys are the only place each name is stated,
with "did you mean" on unknown names, and "module:attr" paths imported only when a name is first asked
for."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from kvgate.errors import BadInput

T = TypeVar("T")


def unknown_name(kind: str, name: str, known: list[str]) -> BadInput:
    """The one-line error for an unknown `name` of `kind`, suggesting the closest known name, case aside
    ("JSN" is close to "json")."""
    folded = {k.lower(): k for k in reversed(known)}  # the first of names alike but for case
    close = [folded[k] for k in difflib.get_close_matches(name.lower(), list(folded), n=1, cutoff=0.5)]
    hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(sorted(known)) or 'none'}"
    return BadInput(f"unknown {kind} {name!r}{hint}")


def load(path: str) -> Any:
    """The attribute a "module:attr" path names, its module imported now."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


class Registry(Mapping[str, T]):
    """Names → items of one plug-in `kind`, in the order given; reads like a dict (`.get` answers None
    for an unknown name), but `registry[name]` refuses one with "did you mean".

    `records`: items given whole (frozen records that name their own "module:attr" implementation,
    read without importing it). `lazy`: "module:Class" paths, built as `Class(name=<key>)` when first
    asked for, so a class never restates its name."""

    def __init__(self, kind: str, *, records: dict[str, T] | None = None, lazy: dict[str, str] | None = None):
        self.kind = kind
        self._items: dict[str, T] = dict(records or {})
        self._lazy = dict(lazy or {})
        if self._items.keys() & self._lazy.keys():
            raise ValueError(f"{kind} {sorted(self._items.keys() & self._lazy.keys())} given twice")

    def __getitem__(self, name: str) -> T:
        if name not in self._items:
            if name not in self._lazy:
                raise unknown_name(self.kind, name, self.names())
            self._items[name] = load(self._lazy[name])(name=name)
        return self._items[name]

    def get(self, name: str, default: Any = None) -> Any:
        """The item called `name`, or `default` when there is none (a dict's `get`)."""
        if name not in self:
            return default
        return self[name]

    def name_of(self, path: str, field: str = "factory") -> str:
        """The one name whose lazy path, or whose record's `field`, is the "module:attr" `path`: how a
        plug-in class reads its own name from its table instead of restating it
        (`name = TABLE.name_of(f"{__module__}:{__qualname__}")` in its body)."""
        (name,) = [n for n, p in self._lazy.items() if p == path] + [
            n for n, item in self._items.items() if getattr(item, field, None) == path
        ]
        return name

    def names(self) -> list[str]:
        return list(dict.fromkeys([*self._lazy, *self._items]))

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())
