"""Suite specs (TOML; shipped ones under `suites/`): a name, a description and generator entries.

    name = "smoke"
    description = "…"
    [[generate]]
    generator = "passkey"
    lengths = [512, 1024]
    …  # the generator's parameters (its params dataclass fields); unknown keys are errors

Values must have their parameter's type; integers lie in [0, MAX_PARAM or MAX_INT_PARAM] (per_cell at most
100,000, max_new_tokens at most 65,536, other counts and lengths at most 2^20). `[[dataset]]` entries
(kvgate.workload.datasets) and `[[trace]]` entries (kvgate.workload.traces) take
their source's parameters the same way; a suite needs at least one entry of any kind. Their relative file
paths are relative to the suite file's folder: each suite gets its own source objects bound to that folder,
and the parameters keep the paths as written (case ids hash them), resolved only when the data is read.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

from kvgate import shipped
from kvgate.errors import BadInput
from kvgate.names import check_name, exists
from kvgate.registry import unknown_name
from kvgate.spec_kinds import TOP_KEYS, refuse_other_kind
from kvgate.tomlspec import check_field_type, check_keys, load_toml
from kvgate.workload.generators.base import GENERATORS, Generator, param_names

MAX_PARAM = {"per_cell": 100_000, "max_new_tokens": 65_536}
"""Documented maxima of integer parameters; any other integer parameter is at most MAX_INT_PARAM."""
MAX_INT_PARAM = 1 << 20


@dataclass(frozen=True)
class SuiteEntry:
    generator: Generator
    params: Any


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    description: str
    entries: tuple[SuiteEntry, ...]
    text: str
    """The spec's TOML text, stored in the workload's metadata."""


def _sources(folder: Path) -> dict[str, Generator]:
    """The non-generator entry kinds, `[[dataset]]` and `[[trace]]` tables, reading files from `folder`."""
    from kvgate.workload.datasets import DatasetSource
    from kvgate.workload.traces import TraceSource

    return {"dataset": DatasetSource(folder=folder), "trace": TraceSource(folder=folder)}


def shipped_suites() -> dict[str, Path]:
    return {p.stem: p for p in sorted(shipped.suites_dir().glob("*.toml"))}


def resolve_suite(name_or_path: str) -> SuiteSpec:
    """A shipped suite by name, or a suite spec file by path."""
    path = Path(name_or_path)
    if name_or_path.endswith(".toml") or exists(path):
        return parse_suite(path)
    suites = shipped_suites()
    if name_or_path not in suites:
        raise unknown_name("suite", name_or_path, list(suites))
    return parse_suite(suites[name_or_path])


def parse_suite(path: Path) -> SuiteSpec:
    data = load_toml(path, "suite")
    where = str(path)
    sources = _sources(path.parent.absolute())
    refuse_other_kind(data, "suite", where)
    check_keys(data, set(TOP_KEYS["suite"]), where, required=frozenset({"name"}))
    entries = []
    for i, table in enumerate(_entries(data, "generate", where)):
        here = f"{where} [[generate]] #{i + 1}"
        if "generator" not in table:
            raise BadInput(f"{here}: missing key 'generator'")
        if not isinstance(table["generator"], str):
            raise BadInput(f"{here}: generator must be a name, got {table['generator']!r}")
        generator = GENERATORS[table["generator"]]
        fields = {k: v for k, v in table.items() if k != "generator"}
        entries.append(SuiteEntry(generator, _params(generator, fields, here)))
    for kind, source in sources.items():
        for i, table in enumerate(_entries(data, kind, where)):
            entries.append(SuiteEntry(source, _params(source, table, f"{where} [[{kind}]] #{i + 1}")))
    if not entries:
        raise BadInput(f"{where}: the suite has no [[generate]], [[dataset]] or [[trace]] entries")
    return SuiteSpec(
        name=check_name("suite", data["name"], where),
        description=_description(data.get("description", ""), where),
        entries=tuple(entries),
        text=path.read_text(encoding="utf-8"),
    )


def _entries(data: dict[str, Any], kind: str, where: str) -> list[dict[str, Any]]:
    """The `[[kind]]` tables of a suite: a list of tables, or a BadInput."""
    value = data.get(kind, [])
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise BadInput(f"{where}: {kind} must be [[{kind}]] tables")
    return value


def _description(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise BadInput(f"{where}: description must be a string, got {value!r}")
    return value


def check_bound(key: str, value: Any, here: str) -> None:
    """Integer parameters (alone or in a list) lie in [0, their maximum] (`MAX_PARAM`, else MAX_INT_PARAM)."""
    top = MAX_PARAM.get(key, MAX_INT_PARAM)
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, int) and not isinstance(item, bool) and not 0 <= item <= top:
            raise BadInput(f"{here}: {key} must be in [0, {top}], got {item}")


def _params(generator: Generator, fields: dict[str, Any], here: str) -> Any:
    """The entry's parameters (its table) checked (keys, required keys, types, bounds) and built; a
    missing key is named as in every spec ("missing key 'depths'", not the dataclass's TypeError)."""
    declared = dataclass_fields(generator.params_type)
    required = frozenset(f.name for f in declared if f.default is MISSING and f.default_factory is MISSING)
    check_keys(fields, param_names(generator.params_type), here, required=required)
    types = {f.name: f.type for f in declared}
    for key, value in fields.items():
        check_field_type(value, types[key], f"{here}: {key}")
        check_bound(key, value, here)
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    try:
        return generator.params_type(**fields)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"{here}: {exc}") from None
