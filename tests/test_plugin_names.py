"""Each plug-in name is stated once: in its kind's table (`kvgate.registry.Registry`). A walk of every
module's syntax tree (`ast`) looks for the two ways a name gets stated again:

- a list of a kind's names: a dict's keys, a tuple, list or set, or a `Literal[...]`, holding two or more
  names of one kind (a second truth that can drift from the table);
- a plug-in restating its own key: a class-level `name = "<key>"` (an engine or executor class reads its
  key from the table: `name = registered_name(__module__, __qualname__)`,
  `name = EXECUTORS.name_of(f"{__module__}:{__qualname__}")`).

A single name used as a value (a spec's default, a check on one method, a generator naming its
validator) is a reference, not a statement, and docstrings never count. The tables' "module:attr"
paths are checked to name what they load. No import circle and no upward import: tests/test_layers.py
(both: `PYTHONPATH=$PWD .venv/bin/python -m pytest tests/test_layers.py tests/test_plugin_names.py`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import get_args

import pytest

from kvgate.engines.registry import ENGINES
from kvgate.engines.server.flavours.registry import FLAVOURS
from kvgate.errors import BadInput
from kvgate.executors.registry import EXECUTORS
from kvgate.registry import Registry, load
from kvgate.report.render.formats import FORMATS
from kvgate.treatments.eviction_methods import EVICTION_METHODS, EvictionMethodName
from kvgate.treatments.spec import EVICTION_METHOD_NAMES, Eviction, field_choices
from kvgate.validators.registry import VALIDATORS
from kvgate.workload.generators.base import GENERATORS

PACKAGE = Path(__file__).resolve().parents[1] / "kvgate"
TABLES: dict[str, tuple[Registry[object], str]] = {
    "engine": (ENGINES, "kvgate/engines/registry.py"),
    "eviction method": (EVICTION_METHODS, "kvgate/treatments/eviction_methods.py"),
    "validator": (VALIDATORS, "kvgate/validators/registry.py"),
    "generator": (GENERATORS, "kvgate/workload/generators/base.py"),
    "server flavour": (FLAVOURS, "kvgate/engines/server/flavours/registry.py"),
    "report format": (FORMATS, "kvgate/report/render/formats.py"),
    "executor": (EXECUTORS, "kvgate/executors/registry.py"),
}
"""Each plug-in kind → its table and the module that states it."""


def lists_of_names(tree: ast.AST, names: set[str]) -> Iterator[tuple[int, list[str]]]:
    """(line, names) of every dict-key, tuple, list or set display holding two or more of `names`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            items: list[ast.expr | None] = list(node.keys)
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = list(node.elts)
        else:
            continue
        found = [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]
        if len(found) >= 2:
            yield node.lineno, found


def own_names(tree: ast.AST, names: set[str]) -> Iterator[tuple[int, str]]:
    """(line, name) of every class-level `name = "<one of names>"` (annotated or not)."""
    for cls in ast.walk(tree):
        for stmt in cls.body if isinstance(cls, ast.ClassDef) else []:
            target = stmt.target if isinstance(stmt, ast.AnnAssign) else None
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
            value = getattr(stmt, "value", None)
            named = isinstance(target, ast.Name) and target.id == "name"
            if named and isinstance(value, ast.Constant) and value.value in names:
                yield stmt.lineno, value.value


@cache
def package_trees() -> tuple[tuple[str, ast.Module], ...]:
    """(path from the checkout, syntax tree) of every module in kvgate/, parsed once for every kind."""
    return tuple(
        (path.relative_to(PACKAGE.parent).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
    )


def statements(kind: str) -> list[str]:
    """Where `kind`'s names are stated in kvgate/, as "path:line names"."""
    names = set(TABLES[kind][0])
    out = []
    for where, tree in package_trees():
        out += [f"{where}:{line} {found}" for line, found in lists_of_names(tree, names)]
        out += [f"{where}:{line} name = {found!r}" for line, found in own_names(tree, names)]
    return out


def test_each_plugin_name_is_stated_once_in_its_table() -> None:
    for kind, (table, module) in TABLES.items():
        assert len(table) >= 2, kind
        found = statements(kind)
        assert len(found) == 1 and found[0].startswith(f"{module}:"), (kind, found)


def test_the_walk_finds_a_restated_list_and_a_restated_name() -> None:
    """The check can fail: a Literal of two method names, a validator class naming itself, the CLI's
    choice of executors written out and an executor class naming itself."""
    planted = ast.parse(
        'Method = Literal["snapkv", "h2o"]\nBUDGETED = ("adakv", "pyramidkv")\n'
        'class Exact:\n    name: str = "exact"\n'
        'option = click.Choice(["local", "ray"])\nclass LocalExecutor:\n    name = "local"\n'
    )
    methods = set(EVICTION_METHODS)
    assert sorted(line for line, _ in lists_of_names(planted, methods)) == [1, 2]
    assert list(own_names(planted, set(VALIDATORS))) == [(4, "exact")]
    assert list(lists_of_names(planted, set(EXECUTORS))) == [(5, ["local", "ray"])]
    assert list(own_names(planted, set(EXECUTORS))) == [(7, "local")]


def test_the_method_literal_is_read_from_the_table() -> None:
    """The spec's check, `kvgate treatments` and the report schema read the table's names, in order."""
    assert EVICTION_METHOD_NAMES == tuple(EVICTION_METHODS) == field_choices(Eviction)["method"]
    assert get_args(EvictionMethodName) == EVICTION_METHOD_NAMES
    with pytest.raises(ValueError, match="unknown eviction method 'snapk'; did you mean 'snapkv'"):
        Eviction("e", method="snapk")


def test_a_table_reads_like_a_dict_and_refuses_an_unknown_name_with_a_hint() -> None:
    assert FLAVOURS.get("vllm") is None and FLAVOURS.get("sglang") is FLAVOURS["sglang"]
    assert FLAVOURS["sglang"].name == "sglang" and list(FLAVOURS) == FLAVOURS.names()
    with pytest.raises(BadInput, match="unknown server flavour 'sglan'; did you mean 'sglang'"):
        FLAVOURS["sglan"]


def test_an_executor_reads_its_name_from_the_table() -> None:
    """Each executor class's `name` is its key (`Registry.name_of`), and the table refuses a misspelt one."""
    from kvgate.executors.registry import executor_for

    assert [load(EXECUTORS[n].factory).name for n in EXECUTORS] == ["local", "ray"]
    assert [load(EXECUTORS[n].factory).joins_cluster for n in EXECUTORS] == [False, True]  # from the records
    assert executor_for("local").name == "local"
    with pytest.raises(BadInput, match="unknown executor 'rya'; did you mean 'ray'"):
        executor_for("rya")
    with pytest.raises(BadInput, match=r"^--ray-address and --ray-workers need --executor ray$"):
        executor_for("local", workers=2)


def defines(path: Path, attr: str) -> bool:
    """Whether the module at `path` defines `attr` at its top level (a class, a function or a name)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == attr:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == attr for t in targets):
            return True
    return False


def test_every_module_path_names_what_it_loads() -> None:
    """Each "kvgate.module:attr" string in kvgate/ (the tables' lazy paths) names a module that
    defines `attr`, read without importing it: a renamed class fails here, not when first asked for."""
    paths = {
        node.value
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and re.fullmatch(r"kvgate(\.\w+)+:\w+", node.value)
    }  # fmt: skip
    records = {e.factory for e in ENGINES.values()} | {m.method for m in EVICTION_METHODS.values()}
    records |= {e.factory for e in EXECUTORS.values()}
    assert records | {f.renderer for f in FORMATS.values()} <= paths
    wrong = []
    for text in sorted(paths):
        module, _, attr = text.partition(":")
        file = PACKAGE.parent / Path(*module.split("."))
        file = file / "__init__.py" if file.is_dir() else file.with_suffix(".py")
        if not (file.is_file() and defines(file, attr)):
            wrong.append(text)
    assert len(paths) >= 30 and not wrong, wrong
