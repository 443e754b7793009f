"""`kvgate run --arms A,B`: the matrix cut down to the named candidates (the control always stays).

The subset is written as a matrix file of the same name in a temporary folder, so the run stores it (and
resumes from it) like any other matrix; `[arm.X]` and `[faults.X]` tables of arms left out are dropped.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from pathlib import Path
from typing import Any

from kvgate.errors import BadInput
from kvgate.registry import unknown_name

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def parse_arms(value: str) -> list[str]:
    """ "A,B" → ["A", "B"]; an empty list or an empty name is a BadInput."""
    names = [n.strip() for n in value.split(",")]
    if not value.strip() or any(not n for n in names):
        raise BadInput(
            f"--arms {value!r}: give arm names separated by commas, e.g. --arms streaming-50,fp8-e4m3"
        )
    return list(dict.fromkeys(names))


def matrix_source(name_or_path: str) -> Path:
    """The file of a shipped matrix by name, or a matrix file by path (as `resolve_matrix` finds it)."""
    from kvgate.treatments.matrix import shipped_matrices

    path = Path(name_or_path)
    if name_or_path.endswith(".toml") or path.exists():
        return path
    matrices = shipped_matrices()
    if name_or_path not in matrices:
        raise unknown_name("matrix", name_or_path, list(matrices))
    return matrices[name_or_path]


def subset(data: dict[str, Any], arms: list[str], where: str) -> dict[str, Any]:
    """The parsed matrix `data` with only the candidates in `arms` (and the control)."""
    spec = data.get("matrix")
    if not isinstance(spec, dict) or not isinstance(spec.get("candidates"), list):
        raise BadInput(f"{where}: no [matrix] candidates to choose --arms from")
    control, candidates = spec.get("control"), [str(c) for c in spec["candidates"]]
    for name in arms:
        if name != control and name not in candidates:
            raise unknown_name(f"arm in --arms (matrix {where})", name, candidates)
    keep = [c for c in candidates if c in arms]
    if not keep:
        raise BadInput(f"--arms names only the control {control!r}: name at least one candidate")
    out = dict(data) | {"matrix": spec | {"candidates": keep}}
    for section in ("arm", "faults"):
        if isinstance(data.get(section), dict):
            out[section] = {k: v for k, v in data[section].items() if k in (*keep, control, "*")}
    return out


def subset_matrix(name_or_path: str, arms: list[str], folder: Path) -> str:
    """Write the matrix `name_or_path` cut down to `arms` into `folder`; returns the new file's path."""
    from kvgate.tomlspec import parse_toml
    from kvgate.treatments.matrix import read_matrix_text

    source = matrix_source(name_or_path)
    data = parse_toml(read_matrix_text(source), str(source))  # the reading path of every matrix
    cut = subset(data, arms, str(source))
    text = dumps(cut)
    if tomllib.loads(text) != cut:
        raise BadInput(f"matrix {source}: its subset for --arms cannot be written back as TOML")
    path = folder / f"{source.stem}.toml"
    path.write_text(f"# {source.name} with the candidates {', '.join(cut['matrix']['candidates'])}\n" + text)
    return str(path)


def dumps(data: dict[str, Any]) -> str:
    """`data` (as tomllib reads it: tables, arrays, strings, numbers, booleans) as TOML text."""
    lines: list[str] = []
    _table(lines, (), data)
    return "\n".join(lines) + "\n"


def _table(lines: list[str], path: tuple[str, ...], table: dict[str, Any]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in table.items() if isinstance(v, dict)}
    if path and (scalars or not tables):
        lines.append(f"[{'.'.join(_key(p) for p in path)}]")
    lines += [f"{_key(k)} = {_value(v)}" for k, v in scalars.items()]
    for k, v in tables.items():
        _table(lines, (*path, k), v)


def _key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return (
            ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
            if not math.isfinite(value)
            else repr(value)
        )
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise BadInput(f"a matrix value of type {type(value).__name__} cannot be written back as TOML")
