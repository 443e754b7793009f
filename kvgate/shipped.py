"""The specs kvgate ships: suites, matrices with the treatment catalog and the default policy, and the
report templates, kept in the checkout's top-level `suites/`, `treatments/` and `reports/templates/`.

- In a checkout (an editable install, or `PYTHONPATH`), they are read where they lie.
- In a wheel, pyproject.toml's `package-dir` maps them to `kvgate/data/{suites,treatments,reports}/`
  (tests/cli/test_wheel.py checks that every shipped file is there).

Every reader of shipped data goes through this module. A file given on the command line (a suite, a
matrix, a policy) is read instead of the shipped one of that name; a matrix file's own treatments
override the catalog's.
"""

from __future__ import annotations

from pathlib import Path

INSTALLED = Path(__file__).parent / "data"
"""Where a wheel holds the shipped folders, one per kind."""
CHECKOUT = Path(__file__).parents[1]
"""The checkout's root, which holds them in a source tree."""
FOLDERS = {"suites": "suites", "treatments": "treatments", "reports": "reports/templates"}
"""Each kind's folder in the checkout (pyproject.toml's package-dir maps the same into the wheel)."""


def data_dir(kind: str) -> Path:
    """The shipped folder `kind` (`suites`, `treatments` or `reports`) as a path on disk."""
    for folder in (INSTALLED / kind, CHECKOUT / FOLDERS[kind]):
        if folder.is_dir():
            return folder
    raise RuntimeError(f"kvgate's shipped {kind} are in neither {INSTALLED} nor {CHECKOUT}: reinstall kvgate")


def suites_dir() -> Path:
    return data_dir("suites")


def treatments_dir() -> Path:
    return data_dir("treatments")


def reports_dir() -> Path:
    """The report templates: the HTML page's Jinja2 template and the report JSON's schema."""
    return data_dir("reports")


def default_policy() -> Path:
    """The gate policy used when none is given."""
    return treatments_dir() / "policy.toml"
