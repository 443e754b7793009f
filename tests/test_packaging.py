"""pyproject.toml lists every package of kvgate/ and maps every shipped file into the wheel (the list is
explicit because the shipped folders lie outside kvgate/; tests/cli/test_wheel.py builds the wheel)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

from kvgate.shipped import FOLDERS

REPO = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_every_package_of_the_tree_is_listed() -> None:
    tree = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "kvgate").rglob("__init__.py")}
    mapped = set(SETUPTOOLS["package-dir"])
    assert set(SETUPTOOLS["packages"]) == tree | mapped, "list the new package in pyproject.toml's packages"


def test_every_shipped_file_is_package_data() -> None:
    for package, folder in SETUPTOOLS["package-dir"].items():
        patterns = SETUPTOOLS["package-data"][package]
        files = [p.relative_to(REPO / folder).as_posix() for p in (REPO / folder).rglob("*") if p.is_file()]
        shipped = [f for f in files if any(fnmatch.fnmatch(f, pattern) for pattern in patterns)]
        assert files and shipped == files, f"{folder}/ holds files no package-data pattern ships"


def test_the_wheel_maps_the_folders_the_checkout_reads() -> None:
    assert SETUPTOOLS["package-dir"] == {f"kvgate.data.{kind}": f for kind, f in FOLDERS.items()}
