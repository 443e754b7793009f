"""The one way kvgate reads a TOML or JSON file: a regular file only (never a pipe, device or folder,
whichever link leads there), its size checked before it is read and the read capped at that size,
UTF-8 checked, and the parsed value's nesting depth checked. Every refusal is a one-line BadInput."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from kvgate.errors import BadInput
from kvgate.spec_kinds import GOES_TO, WHAT, is_parquet

MAX_DEPTH = 64
"""Deepest nesting of tables, arrays or objects a spec, manifest or index may hold (kvgate's own go
four deep)."""


def read_bytes(path: Path, limit: int, what: str) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes; `what` names it in errors.

    A missing file raises FileNotFoundError (callers say what its absence means); any other problem is
    a BadInput. The file is opened non-blocking, so a named pipe is refused instead of waited on.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: an embedded NUL
        raise BadInput(f"cannot read {what} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        mode = os.fstat(fd)
        if not stat.S_ISREG(mode.st_mode):
            kind = _kind(mode.st_mode)
            raise BadInput(f"{what} {path} is not a regular file (a {kind}); kvgate reads only regular files")
        if mode.st_size > limit:
            if is_parquet(os.pread(fd, 4, 0)):
                raise BadInput(_parquet(path, what))
            raise BadInput(f"{what} {path} is larger than {limit} bytes ({mode.st_size}); give a smaller one")
        os.set_blocking(fd, True)
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise BadInput(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:  # it grew while being read
        raise BadInput(f"{what} {path} is larger than {limit} bytes; give a smaller file")
    return data


def read_text(path: Path, limit: int, what: str) -> str:
    """`read_bytes` decoded as UTF-8; other bytes are a BadInput naming the first bad offset."""
    data = read_bytes(path, limit, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if is_parquet(data):
            raise BadInput(_parquet(path, what)) from None
        raise BadInput(f"{what} {path} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def _parquet(path: Path, what: str) -> str:
    """A Parquet file where a text file of kind `what` belongs: what it is and where it goes."""
    return f"{path} is {WHAT['parquet']}, not {WHAT.get(what, f'a {what}')}: {GOES_TO['parquet']}"


def load_json(path: Path, limit: int, what: str) -> Any:
    """A JSON file read by `read_text` and parsed by `parse_json`."""
    return parse_json(read_text(path, limit, what), f"{what} {path}")


def parse_json(text: str | bytes, where: str) -> Any:
    """JSON text parsed, its depth checked (`check_depth`); invalid JSON is a BadInput naming `where`."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise BadInput(f"{where} is nested deeper than {MAX_DEPTH} levels; no kvgate file is") from None
    except ValueError as exc:  # also bad UTF-8 in bytes
        raise BadInput(f"{where} is not valid JSON: {str(exc).splitlines()[0]}") from None
    check_depth(value, where)
    return value


def check_depth(value: Any, where: str, limit: int = MAX_DEPTH) -> None:
    """No dict or list inside `value` deeper than `limit` levels (checked without recursion)."""
    level: list[Any] = [value]
    for _ in range(limit + 1):
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item if isinstance(item, list) else ())
            if isinstance(child, dict | list)
        ]
        if not level:
            return
    raise BadInput(f"{where} is nested deeper than {limit} levels; no kvgate file is")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISFIFO(mode):
        return "named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special file"
