"""A case's sandbox: a fresh folder holding its inputs (`in/`), the folders kvgate may write, a sentinel
folder outside the run, and character devices of its own; the edits that fill `in/`, and the snapshot
that shows what a case changed."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hostile.case import Arg, Case, Prep

DEVICES = {"null": 3, "zero": 5, "urandom": 9}
"""Character devices made in each sandbox (Linux minor numbers of mem devices): a case names these,
never /dev itself, so a kvgate that renames a file over a device it was given (as `view -o /dev/null`
did on f684a0a) replaces the sandbox's node, not the machine's."""
SPECIAL_KINDS = ["fifo", "/dev/zero", "/dev/urandom", "/dev/null", "folder", "dangling", "loop"]
FOLDERS = ("in", "runs", "out", "work", "tmp", "home", "outside", "devices")


def make_sandbox(root: Path, case: Case) -> None:
    """`root` made a case's sandbox, then filled by the case's edits."""
    for sub in FOLDERS:
        (root / sub).mkdir(parents=True)
    for name, minor in DEVICES.items():  # never the machine's own: kvgate must not replace those
        os.mknod(root / "devices" / name, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    (root / "outside" / "sentinel.txt").write_text("outside the run\n")
    for prep in case.prep:
        prep(root)


def expand(arg: Arg, root: Path) -> Arg:
    if isinstance(arg, bytes):
        return arg
    return arg.replace("{root}", str(root))


def copy(src: Path, name: str) -> Prep:
    def prep(root: Path) -> None:
        (shutil.copytree if src.is_dir() else shutil.copy)(src, root / "in" / name, symlinks=True)

    return prep


def write(name: str, data: bytes) -> Prep:
    def prep(root: Path) -> None:
        path = root / "in" / os.fsdecode(name.encode("utf-8", "surrogateescape"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return prep


def special(name: str, kind: str) -> Prep:
    """`in/NAME` made a special file: a named pipe, a link to a device, a folder, a dangling link, a
    link loop, or a link to a file outside the run (the sentinel folder)."""

    def prep(root: Path) -> None:
        path = root / "in" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind.startswith("/dev/"):  # a link to the sandbox's own node of that device
            path.symlink_to(root / "devices" / kind.removeprefix("/dev/"))
        elif kind == "folder":
            path.mkdir()
        elif kind == "dangling":
            path.symlink_to(root / "nowhere" / "x")
        elif kind == "loop":
            path.symlink_to(path)
        elif kind == "outside-link":
            path.symlink_to(root / "outside" / "sentinel.txt")
        elif kind == "outside-dir-link":
            path.symlink_to(root / "outside")
        elif kind == "hardlink":
            os.link(root / "outside" / "sentinel.txt", path)
        else:
            raise ValueError(kind)

    return prep


def edit(name: str, change: Callable[[Path], None]) -> Prep:
    return lambda root: change(root / "in" / name)


def json_edit(path: Path, change: Callable[[Any], Any]) -> None:
    path.write_text(json.dumps(change(json.loads(path.read_text()))))


def set_in_manifest(key: str, value: Any) -> Prep:
    """The sandbox's run with its manifest's `key` set to `value`."""
    return edit("run/manifest.json", lambda p: json_edit(p, lambda m: {**m, key: value}))


def snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    seen: dict[str, tuple[Any, ...]] = {}
    for folder, dirs, files in os.walk(root):
        for entry in dirs + files:
            path = os.path.join(folder, entry)
            st = os.lstat(path)
            link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else ""
            size = st.st_size if stat.S_ISREG(st.st_mode) else 0
            mtime = 0 if stat.S_ISDIR(st.st_mode) else st.st_mtime_ns  # a folder counts by what it holds
            seen[os.path.relpath(path, root)] = (stat.S_IFMT(st.st_mode), size, mtime, link)
    return seen


def changed(before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]]) -> list[str]:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def allowed(path: str, prefixes: list[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes)
