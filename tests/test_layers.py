"""Every import in kvgate/ points down: a walk of each module's syntax tree (`ast`, every `import`,
lazy and type-only ones too) finds no import of a higher layer, none between two rooms of one layer,
and no circle of modules; inside report/, render reads what analysis computes into document.

A room is a top-level module or subpackage of kvgate (`kvgate.report`, `kvgate.errors`). LAYERS lists
them from the top down; a room imports only rooms of lower layers (and its own modules). A new room
must be placed in LAYERS.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kvgate"
LAYERS: list[set[str]] = [
    {"__main__"},
    {"cli", "analysis"},
    {"executors"},
    {"runner"},
    {"report"},
    {"rundir"},
    {"engines"},
    {"treatments", "workload", "models"},
    {"gate", "validators", "model_hub", "converted_model", "arrow_numpy", "arrow_build"},
    {"stats", "tomlspec", "registry", "names", "paths", "shipped", "contained", "seeds"},
    {"bounded_file"},
    {"spec_kinds"},
    {"errors", "__init__", "allocator"},
]
REPORT_LAYERS = ["kvgate.report.render", "kvgate.report.analysis", "kvgate.report.document"]
"""Inside report/, from the top down: the renderers read the model the analysis computes."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(module: str) -> Iterator[str]:
    """The kvgate modules `module` imports (a name imported from a package counts as its submodule
    when there is one)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name.startswith("kvgate") and name != module:
                yield name


GRAPH = {module: set(imports(module)) for module in MODULES}


def layer(name: str) -> int:
    (index,) = [i for i, rooms in enumerate(LAYERS) if name in rooms] or [-1]
    return index


def test_every_room_has_a_layer() -> None:
    assert {room(m) for m in MODULES} == set().union(*LAYERS), "place the new room in LAYERS"


def test_no_import_points_up_or_across() -> None:
    wrong = sorted(
        f"{module} imports {target} ({room(module)} is layer {layer(room(module))}, "
        f"{room(target)} layer {layer(room(target))})"
        for module, targets in GRAPH.items()
        for target in targets
        if room(target) != room(module) and layer(room(target)) <= layer(room(module))
    )
    assert not wrong, "\n".join(wrong)


def circles() -> list[set[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = set()
            while True:
                w = stack.pop()
                members.add(w)
                if w == v:
                    break
            if len(members) > 1:
                found.append(members)

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_no_circle_of_modules() -> None:
    assert not circles(), [sorted(c) for c in circles()]


def report_layer(module: str) -> int | None:
    return next((i for i, p in enumerate(REPORT_LAYERS) if module.startswith(p + ".") or module == p), None)


def test_the_report_renders_what_its_analysis_computes() -> None:
    """document imports neither analysis nor render; analysis never imports render."""
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if (here := report_layer(module)) is not None
        for target in targets
        if (there := report_layer(target)) is not None and there < here
    )
    assert not wrong, "\n".join(wrong)
    assert {report_layer(m) for m in MODULES if m.startswith("kvgate.report.")} >= {0, 1, 2}
