"""Matrix specs (TOML under `treatments/`): the treatments and which arms a run compares.

    [matrix]
    control = "full"
    candidates = ["streaming-50", "fp8-e4m3"]
    aa_replicate = true      # run the control twice, in separate namespaces: the noise floor
    confirm_reruns = 0       # re-run each candidate-only failure k times: reproducible or flaky
    batch_size = 1
    [treatment.streaming-50]
    kind = "eviction"
    …
    [faults.fp8-e4m3]        # planted faults, honoured by the fake engine only
    wrong_answer_rate = 0.1

Treatments not defined in the file are looked up in `treatments/catalog.toml`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvgate.errors import BadInput
from kvgate.paths import TREATMENTS_DIR
from kvgate.registry import unknown_name
from kvgate.tomlspec import check_keys, load_toml
from kvgate.treatments.spec import TREATMENT_TYPES, Composite, Treatment

CATALOG = "catalog"
NOT_MATRICES = {CATALOG, "policy"}
MATRIX_KEYS = {"control", "candidates", "aa_replicate", "confirm_reruns", "batch_size", "description"}


@dataclass(frozen=True)
class Matrix:
    name: str
    control: Treatment
    candidates: tuple[Treatment, ...]
    aa_replicate: bool = True
    confirm_reruns: int = 0
    batch_size: int = 1
    faults: dict[str, dict[str, Any]] = field(default_factory=dict)
    text: str = ""
    description: str = ""

    def arms(self) -> tuple[Treatment, ...]:
        return (self.control, *self.candidates)

    def faults_for(self, arm: str) -> dict[str, Any]:
        return {**self.faults.get("*", {}), **self.faults.get(arm, {})}


def shipped_matrices() -> dict[str, Path]:
    return {p.stem: p for p in sorted(TREATMENTS_DIR.glob("*.toml")) if p.stem not in NOT_MATRICES}


def load_treatment_tables(path: Path) -> dict[str, dict[str, Any]]:
    data = load_toml(path)
    tables = data.get("treatment", {})
    if not isinstance(tables, dict):
        raise BadInput(f"{path}: [treatment] must be tables")
    return tables


def parse_treatment(name: str, tables: dict[str, dict[str, Any]], where: str, seen: tuple[str, ...] = ()) -> Treatment:
    """Build treatment `name` from `tables` (strict keys; composites resolve their parts by name)."""
    if name in seen:
        raise BadInput(f"{where}: treatment {name!r} includes itself")
    if name not in tables:
        raise unknown_name("treatment", name, list(tables))
    table = dict(tables[name])
    here = f"{where} [treatment.{name}]"
    kind = table.pop("kind", None)
    if kind not in TREATMENT_TYPES:
        raise BadInput(f"{here}: kind must be one of {', '.join(TREATMENT_TYPES)}, got {kind!r}")
    cls = TREATMENT_TYPES[kind]
    allowed = {f for f in cls.__dataclass_fields__ if f != "name"}
    check_keys(table, allowed, here)
    if cls is Composite:
        parts = table.pop("of", [])
        if not isinstance(parts, list):
            raise BadInput(f"{here}: 'of' must be a list of treatment names")
        table["of"] = tuple(parse_treatment(p, tables, where, (*seen, name)) for p in parts)
    try:
        return cls(name=name, **table)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"{here}: {exc}") from None


def resolve_matrix(name_or_path: str) -> Matrix:
    path = Path(name_or_path)
    if not (name_or_path.endswith(".toml") or path.exists()):
        matrices = shipped_matrices()
        if name_or_path not in matrices:
            raise unknown_name("matrix", name_or_path, list(matrices))
        path = matrices[name_or_path]
    return parse_matrix(path)


def catalog_tables() -> dict[str, dict[str, Any]]:
    path = TREATMENTS_DIR / f"{CATALOG}.toml"
    return load_treatment_tables(path) if path.exists() else {}


def parse_matrix(path: Path) -> Matrix:
    data = load_toml(path)
    where = str(path)
    check_keys(data, {"matrix", "treatment", "faults"}, where, required=frozenset({"matrix"}))
    spec = data["matrix"]
    check_keys(spec, MATRIX_KEYS, f"{where} [matrix]", required=frozenset({"control", "candidates"}))
    tables = {**catalog_tables(), **data.get("treatment", {})}
    control = parse_treatment(spec["control"], tables, where)
    if control.kind != "full":
        raise BadInput(f"{where}: the control {control.name!r} must be of kind 'full'")
    candidates = tuple(parse_treatment(c, tables, where) for c in spec["candidates"])
    names = [control.name, *(c.name for c in candidates)]
    if len(set(names)) != len(names):
        raise BadInput(f"{where}: an arm is listed twice in {names}")
    if not candidates:
        raise BadInput(f"{where}: the matrix has no candidates")
    faults = data.get("faults", {})
    for arm in faults:
        if arm != "*" and arm not in names:
            raise unknown_name("arm in [faults]", arm, names)
    reruns, batch = spec.get("confirm_reruns", 0), spec.get("batch_size", 1)
    if not isinstance(reruns, int) or reruns < 0 or not isinstance(batch, int) or batch < 1:
        raise BadInput(f"{where}: confirm_reruns must be ≥ 0 and batch_size ≥ 1")
    return Matrix(
        name=path.stem,
        control=control,
        candidates=candidates,
        aa_replicate=bool(spec.get("aa_replicate", True)),
        confirm_reruns=reruns,
        batch_size=batch,
        faults=faults,
        text=path.read_text(encoding="utf-8"),
        description=str(spec.get("description", "")),
    )
