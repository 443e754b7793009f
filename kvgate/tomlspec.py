"""Strict TOML reading: unknown keys and wrong types are errors naming the file and key."""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import Any

from kvgate.errors import BadInput


def load_toml(path: Path) -> dict[str, Any]:
    """Parse `path`, turning a missing file or a syntax error into a one-line BadInput."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_toml(text, str(path))


def parse_toml(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{where}: invalid TOML: {exc}") from None


def check_keys(
    table: dict[str, Any], allowed: set[str], where: str, required: frozenset[str] = frozenset()
) -> None:
    """Reject keys outside `allowed` and missing `required` ones, with "did you mean"."""
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, sorted(allowed), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise BadInput(f"{where}: unknown key {key!r}{hint}")
    for key in sorted(required - set(table)):
        raise BadInput(f"{where}: missing key {key!r}")
