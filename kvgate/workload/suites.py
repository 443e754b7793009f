"""Suite specs (TOML under `suites/`): a name, a description and generator entries.

    name = "smoke"
    description = "…"
    [[generate]]
    generator = "passkey"
    lengths = [512, 1024]
    …  # the generator's parameters (its params dataclass fields); unknown keys are errors

`[[dataset]]` entries (kvgate.workload.datasets) and `[[trace]]` entries (kvgate.workload.traces) take
their source's parameters the same way; a suite needs at least one entry of any kind. Their relative file
paths are relative to the suite file's folder: each suite gets its own source objects bound to that folder,
and the parameters keep the paths as written (case ids hash them), resolved only when the data is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvgate.errors import BadInput
from kvgate.paths import SUITES_DIR
from kvgate.registry import unknown_name
from kvgate.tomlspec import check_keys, load_toml
from kvgate.workload.generators.base import GENERATORS, Generator, param_names


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


def _load_generators() -> None:
    from kvgate.workload.generators import (  # noqa: F401  (each registers on import)
        code,
        common_words,
        kv_retrieval,
        needle,
        passkey,
        structured_output,
        tool_call,
        variable_tracking,
    )


def _sources(folder: Path) -> dict[str, Generator]:
    """The non-generator entry kinds, `[[dataset]]` and `[[trace]]` tables, reading files from `folder`."""
    from kvgate.workload.datasets import DatasetSource
    from kvgate.workload.traces import TraceSource

    return {"dataset": DatasetSource(folder=folder), "trace": TraceSource(folder=folder)}


def shipped_suites() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SUITES_DIR.glob("*.toml"))}


def resolve_suite(name_or_path: str) -> SuiteSpec:
    """A shipped suite by name, or a suite spec file by path."""
    path = Path(name_or_path)
    if name_or_path.endswith(".toml") or path.exists():
        return parse_suite(path)
    suites = shipped_suites()
    if name_or_path not in suites:
        raise unknown_name("suite", name_or_path, list(suites))
    return parse_suite(suites[name_or_path])


def parse_suite(path: Path) -> SuiteSpec:
    _load_generators()
    data = load_toml(path)
    where = str(path)
    sources = _sources(path.parent.absolute())
    check_keys(data, {"name", "description", "generate", *sources}, where, required=frozenset({"name"}))
    entries = []
    for i, table in enumerate(data.get("generate", [])):
        here = f"{where} [[generate]] #{i + 1}"
        if "generator" not in table:
            raise BadInput(f"{here}: missing key 'generator'")
        generator = GENERATORS.get(table["generator"])
        fields = {k: v for k, v in table.items() if k != "generator"}
        entries.append(SuiteEntry(generator, _params(generator, fields, here)))
    for kind, source in sources.items():
        for i, table in enumerate(data.get(kind, [])):
            entries.append(SuiteEntry(source, _params(source, table, f"{where} [[{kind}]] #{i + 1}")))
    if not entries:
        raise BadInput(f"{where}: the suite has no [[generate]], [[dataset]] or [[trace]] entries")
    return SuiteSpec(
        name=str(data["name"]),
        description=str(data.get("description", "")),
        entries=tuple(entries),
        text=path.read_text(encoding="utf-8"),
    )


def _params(generator: Generator, fields: dict[str, Any], here: str) -> Any:
    check_keys(fields, param_names(generator.params_type), here)
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    try:
        return generator.params_type(**fields)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"{here}: {exc}") from None
