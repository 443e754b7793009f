"""Safe names: arm, treatment, suite and slice names become folder names and report labels.

A name is 1–64 characters of ASCII letters, digits, `.`, `_`, `-` and `+`, starting with a letter or
digit (`NAME_PATTERN`), so it can never be empty, `.`, `..`, absolute, hold a separator or a NUL, or be
too long for a file name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kvgate.errors import BadInput

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$"
_NAME = re.compile(NAME_PATTERN)


def is_safe_name(name: Any) -> bool:
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def check_name(kind: str, name: Any, where: str = "") -> str:
    """`name` when it is safe; else a one-line BadInput naming the `kind` and the pattern."""
    if not is_safe_name(name):
        prefix = f"{where}: " if where else ""
        raise BadInput(f"{prefix}{kind} name {_shown(name)} is not allowed: names must match {NAME_PATTERN}")
    return str(name)


def exists(path: Path) -> bool:
    """Whether `path` exists; False for a name the file system cannot even look up (too long)."""
    try:
        return path.exists()
    except OSError:
        return False


def _shown(name: Any) -> str:
    text = repr(name)
    return text if len(text) <= 40 else text[:37] + "…"
