"""Strict TOML reading: unknown keys and wrong types are errors naming the file and key."""

from __future__ import annotations

import difflib
import math
import tomllib
from pathlib import Path
from typing import Any

from kvgate.bounded_file import check_depth, read_text
from kvgate.errors import BadInput
from kvgate.spec_kinds import GOES_TO, WHAT, text_kind, toml_kind

MAX_INT = 1 << 31
"""Largest magnitude of an integer a spec may hold (a seed); counts have tighter documented maxima."""
MAX_TOML_BYTES = 1 << 24


def load_toml(path: Path, what: str = "spec") -> dict[str, Any]:
    """Parse `path` (read by `bounded_file.read_text`: a regular UTF-8 file of at most MAX_TOML_BYTES),
    turning a missing or unreadable file or a syntax error into a one-line BadInput; `what` names the
    file's kind in errors."""
    try:
        text = read_text(path, MAX_TOML_BYTES, what)
    except FileNotFoundError:
        raise BadInput(f"{what} {path} does not exist; check the path") from None
    return parse_toml(text, str(path))


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """Parse TOML text; invalid or too deeply nested TOML, or a non-finite or huge number, is a one-line
    BadInput."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        if text_kind(text) == "trace":
            raise BadInput(f"{where} is {WHAT['trace']}, not TOML: {GOES_TO['trace']}") from None
        raise BadInput(f"{where}: invalid TOML: {exc}") from None
    except RecursionError:
        raise BadInput(f"{where}: nested too deeply") from None
    check_depth(data, where)
    _check_values(data, where)
    return data


def toml_text_kind(text: str) -> str | None:
    """The kind of kvgate TOML spec `text` is (`spec_kinds.toml_kind`: a suite, a matrix or a policy);
    None when it is not TOML or its keys name no single kind."""
    try:
        return toml_kind(parse_toml(text, "spec"))
    except BadInput:
        return None


def toml_file_kind(path: Path) -> str | None:
    """`toml_text_kind` of the file at `path`; None also when it cannot be read as a spec."""
    try:
        return toml_text_kind(read_text(path, MAX_TOML_BYTES, "spec"))
    except (BadInput, OSError):
        return None


def _check_values(value: Any, where: str) -> None:
    """No NaN or infinite float and no integer beyond ±MAX_INT anywhere in the spec."""
    if isinstance(value, dict):
        for item in value.values():
            _check_values(item, where)
    elif isinstance(value, list):
        for item in value:
            _check_values(item, where)
    elif isinstance(value, float) and not math.isfinite(value):
        raise BadInput(f"{where}: {value} is not a finite number")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise BadInput(f"{where}: {value} is beyond ±{MAX_INT}")


def check_field_type(value: Any, annotation: Any, where: str) -> None:
    """`value` fits a dataclass field annotated `annotation` (int, float, bool, str, dict, a tuple or
    list of those, or X | None); a BadInput naming `where` when it does not."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    if not _fits(value, text.replace(" ", "")):
        raise BadInput(f"{where} must be {text}, got {value!r}"[:200])


def _fits(value: Any, text: str) -> bool:
    union = _split_union(text)
    if len(union) > 1:
        return any(_fits(value, t) for t in union)
    base, _, inner = text.partition("[")
    if base in ("int", "float", "bool", "str", "None") or not base:
        return _scalar(value, base)
    if base in ("dict", "Mapping"):
        return isinstance(value, dict)
    if base in ("tuple", "list", "Sequence"):
        item = inner.rstrip("]").split(",")[0]
        return isinstance(value, list | tuple) and all(_fits(v, item) for v in value)
    return True  # a type these checks do not know: left to the dataclass


def _split_union(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += (char == "[") - (char == "]")
        if char == "|" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def _scalar(value: Any, base: str) -> bool:
    if base == "None":
        return value is None
    if base == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if base == "int":
        return isinstance(value, int)
    if base == "float":
        return isinstance(value, int | float)
    return isinstance(value, str)


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
