"""The specs kvgate ships inside the package (`kvgate/data/`): suites, matrices with the treatment
catalog and the default policy, and the report templates, found through `importlib.resources`.

Every reader of shipped data goes through this module. A file given on the command line (a suite, a
matrix, a policy) is read instead of the shipped one of that name; a matrix file's own treatments
override the catalog's.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def data_dir(kind: str) -> Path:
    """The shipped folder `kind` (`suites`, `treatments` or `reports`) as a path on disk."""
    folder = resources.files("kvgate").joinpath("data", kind)
    if not isinstance(folder, Path):
        raise RuntimeError(f"kvgate's data must be installed as files, not in an archive: {folder}")
    return folder


def suites_dir() -> Path:
    return data_dir("suites")


def treatments_dir() -> Path:
    return data_dir("treatments")


def reports_dir() -> Path:
    return data_dir("reports")


def default_policy() -> Path:
    """The gate policy used when none is given."""
    return treatments_dir() / "policy.toml"
