"""Suite specs (TOML under `suites/`): a name, a description and generator entries.

    name = "smoke"
    description = "…"
    [[generate]]
    generator = "passkey"
    lengths = [512, 1024]
    …  # the generator's parameters (its params dataclass fields); unknown keys are errors
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
    from kvgate.workload.generators import passkey  # noqa: F401  (registers on import)


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
    check_keys(data, {"name", "description", "generate"}, where, required=frozenset({"name", "generate"}))
    entries = []
    for i, table in enumerate(data["generate"]):
        here = f"{where} [[generate]] #{i + 1}"
        if "generator" not in table:
            raise BadInput(f"{here}: missing key 'generator'")
        generator = GENERATORS.get(table["generator"])
        fields = {k: v for k, v in table.items() if k != "generator"}
        check_keys(fields, param_names(generator.params_type), here)
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
        try:
            params = generator.params_type(**fields)
        except (TypeError, ValueError) as exc:
            raise BadInput(f"{here}: {exc}") from None
        entries.append(SuiteEntry(generator, params))
    if not entries:
        raise BadInput(f"{where}: the suite has no [[generate]] entries")
    return SuiteSpec(
        name=str(data["name"]),
        description=str(data.get("description", "")),
        entries=tuple(entries),
        text=path.read_text(encoding="utf-8"),
    )
