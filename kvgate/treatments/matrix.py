"""Matrix specs (TOML; shipped ones in `treatments/`): the treatments and the arms a run compares.

    [matrix]
    description = "…"
    control = "full"
    candidates = ["streaming-50", "fp8-e4m3", "prefix-reuse"]
    aa_replicate = true      # run the control twice, in separate namespaces: the noise floor
    confirm_reruns = 0       # re-run each candidate-only failure k ≤ 10 times: reproducible or flaky
    batch_size = 1           # cases submitted together, ≤ 4096 (a batch for hf, requests for vllm)
    seed = 0                 # handed to every arm's session alike, in [0, 2³² − 1]
    [load]                   # the stress schedules every arm runs under (docs/reference.md)
    concurrency = 1          # requests in flight at once, ≤ 1024 (engines that serve requests)
    kv_blocks = 64           # the KV pool, in blocks: pressure (engines that size it: server, vllm)
    abort_percent = 0        # that share of measured requests is first cancelled mid-generation and
                             # sent again under the same request id: abort and resubmit
    interleave = false       # each batch's prompts also sent under another namespace: A → B → A
    resend_percent = 0       # that share of cases sent again after other prompts evicted their blocks
    repeat = 1               # each batch generated this often (a soak), cache churn between repeats
    [arm.prefix-reuse]       # per-arm load: offload and reuse defects show under load
    batch_size = 8
    concurrency = 8          # the runner hands an arm batches of max(batch_size, concurrency) cases
    [treatment.streaming-50]
    kind = "eviction"
    …
    [faults.fp8-e4m3]        # planted faults, honoured by the fake engine only
    wrong_answer_rate = 0.1

The load keys may also stand in `[matrix]` itself (as before `[load]`), not in both.
Treatments not defined in the file are looked up in the shipped `catalog.toml`. Unknown keys anywhere
are errors naming the key; treatment names match `kvgate.names.NAME_PATTERN` (they name folders).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvgate import shipped
from kvgate.bounded_file import read_text
from kvgate.errors import BadInput
from kvgate.names import check_name, exists
from kvgate.registry import unknown_name
from kvgate.seeds import MAX_SEED
from kvgate.spec_kinds import TOP_KEYS, refuse_other_kind
from kvgate.tomlspec import MAX_TOML_BYTES, check_field_type, check_keys, load_toml, parse_toml
from kvgate.treatments.spec import TREATMENT_TYPES, Composite, Treatment

CATALOG = "catalog"
NOT_MATRICES = {CATALOG, "policy"}
MAX_CONFIRM_RERUNS = 10
"""Most confirm-reruns of each candidate-only failure a matrix may ask for."""
MAX_BATCH_SIZE = 4096
"""Largest batch (default or per arm) a matrix may ask for."""
MAX_CONCURRENCY = 1024
"""Most requests in flight (default or per arm) a matrix may ask for."""
MAX_KV_BLOCKS = 1 << 24
MAX_CANDIDATES = 64
"""Most candidate arms a matrix may hold (each is a full pass over the workload, and a report section)."""
MAX_ARM_CASES = 10_000_000
"""Most arm passes × cases one run may ask for (control, A/A replicate and candidates, first attempts):
about a million generations is a long run on one GPU; ten times that is refused as a typo."""
MAX_REPEAT = 100
"""Most times a soak may generate each batch."""
LOAD_DEFAULTS: dict[str, Any] = {
    "concurrency": 1, "kv_blocks": None, "abort_percent": 0, "interleave": False, "resend_percent": 0,
    "repeat": 1,
}  # fmt: skip
"""Every load key and its value when the matrix does not set it (None: the engine's own pool)."""
LOAD_KEYS = tuple(LOAD_DEFAULTS)
SCHEDULE_KEYS = ("abort_percent", "interleave", "resend_percent", "repeat")
"""The load keys only engines that run stress schedules honour (`EngineInfo.schedules`)."""
DEFAULT_MATRIX = "default"
"""The shipped matrix a run takes when none is named."""
MATRIX_KEYS = {"control", "candidates", "aa_replicate", "confirm_reruns", "batch_size", "seed", "description"}
MATRIX_KEYS |= set(LOAD_KEYS)
ARM_KEYS = {"batch_size", *LOAD_KEYS}


@dataclass(frozen=True)
class Matrix:
    name: str
    control: Treatment
    candidates: tuple[Treatment, ...]
    aa_replicate: bool = True
    confirm_reruns: int = 0
    batch_size: int = 1
    """The default for arms without their own `[arm.<name>] batch_size`."""
    seed: int = 0
    arm_batch_size: dict[str, int] = field(default_factory=dict)
    faults: dict[str, dict[str, Any]] = field(default_factory=dict)
    text: str = ""
    description: str = ""
    load: dict[str, Any] = field(default_factory=dict)
    """The run's load keys set in `[load]` (or `[matrix]`): defaults for every arm."""
    arm_load: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per arm, its own load keys (`[arm.<name>]`)."""

    def arms(self) -> tuple[Treatment, ...]:
        return (self.control, *self.candidates)

    def faults_for(self, arm: str) -> dict[str, Any]:
        return {**self.faults.get("*", {}), **self.faults.get(arm, {})}

    def batch_size_for(self, arm: str) -> int:
        return self.arm_batch_size.get(arm, self.batch_size)

    def load_value(self, arm: str, key: str) -> Any:
        """Load key `key` of `arm`: its `[arm.<name>]` value, else the run's, else the default."""
        return self.arm_load.get(arm, {}).get(key, self.load.get(key, LOAD_DEFAULTS[key]))

    @property
    def concurrency(self) -> int:
        return int(self.load.get("concurrency", 1))

    def concurrency_for(self, arm: str) -> int:
        return int(self.load_value(arm, "concurrency"))

    def kv_blocks_for(self, arm: str) -> int | None:
        blocks = self.load_value(arm, "kv_blocks")
        return None if blocks is None else int(blocks)

    def abort_percent_for(self, arm: str) -> int:
        return int(self.load_value(arm, "abort_percent"))

    def submit_size_for(self, arm: str) -> int:
        """How many cases the runner hands the arm's session at once: enough to keep `concurrency` busy."""
        return max(self.batch_size_for(arm), self.concurrency_for(arm))

    def load_for(self, arm: str) -> dict[str, Any]:
        """The arm's load settings that differ from the defaults (what its manifest entry records)."""
        load = {key: self.load_value(arm, key) for key in LOAD_KEYS}
        return {k: v for k, v in load.items() if v != LOAD_DEFAULTS[k]}

    def stressed(self, arm: str) -> bool:
        """Whether `arm` runs under any load beyond one request at a time on the engine's own pool."""
        return bool(self.load_for(arm))


def shipped_matrices() -> dict[str, Path]:
    return {p.stem: p for p in sorted(shipped.treatments_dir().glob("*.toml")) if p.stem not in NOT_MATRICES}


def load_treatment_tables(path: Path) -> dict[str, dict[str, Any]]:
    return _tables(load_toml(path).get("treatment", {}), f"{path} [treatment]")


def parse_treatment(
    name: str, tables: dict[str, dict[str, Any]], where: str, seen: tuple[str, ...] = ()
) -> Treatment:
    """Build treatment `name` from `tables` (strict keys; composites resolve their parts by name)."""
    check_name("treatment", name, where)
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
        if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
            raise BadInput(f"{here}: 'of' must be a list of treatment names")
        table["of"] = tuple(parse_treatment(p, tables, where, (*seen, name)) for p in parts)
    for key, value in table.items():
        if key != "of":
            check_field_type(value, cls.__dataclass_fields__[key].type, f"{here}: {key}")
    try:
        return cls(name=name, **table)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"{here}: {exc}") from None


def resolve_matrix(name_or_path: str) -> Matrix:
    """A shipped matrix by name, or a matrix spec file by path."""
    path = Path(name_or_path)
    if not (name_or_path.endswith(".toml") or exists(path)):
        matrices = shipped_matrices()
        if name_or_path not in matrices:
            raise unknown_name("matrix", name_or_path, list(matrices))
        path = matrices[name_or_path]
    return parse_matrix_text(read_matrix_text(path), path.stem, str(path))


def read_matrix_text(path: Path) -> str:
    """A matrix file's text, read as every TOML spec is (`bounded_file.read_text`)."""
    try:
        return read_text(path, MAX_TOML_BYTES, "matrix")
    except FileNotFoundError:
        raise BadInput(f"matrix {path} does not exist; check the path") from None


def parse_matrix(path: Path) -> Matrix:
    return resolve_matrix(str(path))


def catalog_tables() -> dict[str, dict[str, Any]]:
    path = shipped.treatments_dir() / f"{CATALOG}.toml"
    return load_treatment_tables(path) if path.exists() else {}


def parse_matrix_text(text: str, name: str, where: str) -> Matrix:
    """Parse a matrix spec; `where` names it in errors (a path, or a run's manifest when resuming)."""
    data = parse_toml(text, where)
    refuse_other_kind(data, "matrix", where)
    check_keys(data, set(TOP_KEYS["matrix"]), where, required=frozenset({"matrix"}))
    here = f"{where} [matrix]"
    spec = _table(data["matrix"], here)
    check_keys(spec, MATRIX_KEYS, here, required=frozenset({"control", "candidates"}))
    tables = {**catalog_tables(), **_tables(data.get("treatment", {}), f"{where} [treatment]")}
    control_name = _typed(spec, "control", str, here)
    candidate_names = spec["candidates"]
    if not isinstance(candidate_names, list) or not all(isinstance(c, str) for c in candidate_names):
        raise BadInput(f"{here}: candidates must be a list of treatment names")
    if len(candidate_names) > MAX_CANDIDATES:
        raise BadInput(
            f"{here}: {len(candidate_names)} candidates, over the most a matrix may hold "
            f"({MAX_CANDIDATES}); split them over several matrices (or pick some with --arms)"
        )
    control = parse_treatment(control_name, tables, where)
    if control.kind != "full":
        raise BadInput(f"{where}: the control {control.name!r} must be of kind 'full'")
    candidates = tuple(parse_treatment(c, tables, where) for c in candidate_names)
    names = [control.name, *(c.name for c in candidates)]
    if len(set(names)) != len(names):
        raise BadInput(f"{where}: an arm is listed twice in {names}")
    if not candidates:
        raise BadInput(f"{where}: the matrix has no candidates")
    return Matrix(
        name=name,
        control=control,
        candidates=candidates,
        aa_replicate=_typed(spec, "aa_replicate", bool, here, True),
        confirm_reruns=_count(spec, "confirm_reruns", 0, here, maximum=MAX_CONFIRM_RERUNS),
        batch_size=_count(spec, "batch_size", 1, here, minimum=1, maximum=MAX_BATCH_SIZE),
        seed=_count(spec, "seed", 0, here, maximum=MAX_SEED),
        arm_batch_size=_arm_batch_sizes(data.get("arm", {}), names, where),
        faults=_faults(data.get("faults", {}), names, where),
        text=text,
        description=_typed(spec, "description", str, here, ""),
        load=_run_load(spec, data.get("load"), where),
        arm_load=_arm_load(data.get("arm", {}), where),
    )


def check_run_size(matrix: Matrix, n_cases: int) -> None:
    """Refuse a run whose arm passes × cases exceed MAX_ARM_CASES, naming the bound and the way out."""
    passes = 1 + int(matrix.aa_replicate) + len(matrix.candidates)
    if passes * n_cases > MAX_ARM_CASES:
        raise BadInput(
            f"matrix {matrix.name!r} on {n_cases} cases asks for {passes} × {n_cases} = {passes * n_cases} "
            f"generations, over the most one run may ({MAX_ARM_CASES}); run fewer cases (--limit) or arms"
        )


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadInput(f"{where} must be a table")
    return value


def _tables(value: Any, where: str) -> dict[str, dict[str, Any]]:
    tables = _table(value, where)
    for key, table in tables.items():
        _table(table, f"{where}.{key}")
    return tables


def _typed(spec: dict[str, Any], key: str, kind: type, where: str, default: Any = None) -> Any:
    value = spec.get(key, default)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadInput(f"{where}: {key} must be a {kind.__name__}, got {value!r}")
    return value


def _count(
    spec: dict[str, Any], key: str, default: int, where: str, minimum: int = 0, maximum: int = MAX_BATCH_SIZE
) -> int:
    value: int = _typed(spec, key, int, where, default)
    if not minimum <= value <= maximum:
        raise BadInput(f"{where}: {key} must be in [{minimum}, {maximum}], got {value}")
    return value


def _arm_batch_sizes(value: Any, names: list[str], where: str) -> dict[str, int]:
    sizes = {}
    for arm, table in _tables(value, f"{where} [arm]").items():
        if arm not in names:
            raise BadInput(f"{where}: {unknown_name('arm in [arm]', arm, names)}")
        here = f"{where} [arm.{arm}]"
        check_keys(table, ARM_KEYS, here)
        if "batch_size" in table:
            sizes[arm] = _count(table, "batch_size", 1, here, minimum=1, maximum=MAX_BATCH_SIZE)
    return sizes


def _load_table(table: dict[str, Any], here: str) -> dict[str, Any]:
    """The load keys `table` sets, each checked against its type and bounds."""
    own: dict[str, Any] = {}
    if "concurrency" in table:
        own["concurrency"] = _count(table, "concurrency", 1, here, minimum=1, maximum=MAX_CONCURRENCY)
    if "kv_blocks" in table:
        own["kv_blocks"] = _count(table, "kv_blocks", 1, here, minimum=1, maximum=MAX_KV_BLOCKS)
    for key in ("abort_percent", "resend_percent"):
        if key in table:
            own[key] = _count(table, key, 0, here, maximum=100)
    if "interleave" in table:
        own["interleave"] = _typed(table, "interleave", bool, here)
    if "repeat" in table:
        own["repeat"] = _count(table, "repeat", 1, here, minimum=1, maximum=MAX_REPEAT)
    return own


def _run_load(spec: dict[str, Any], table: Any, where: str) -> dict[str, Any]:
    """The run's load: `[load]`, or the same keys in `[matrix]` (never one key in both)."""
    load = _table(table, f"{where} [load]") if table is not None else {}
    check_keys(load, set(LOAD_KEYS), f"{where} [load]")
    twice = sorted(set(load) & set(spec) & set(LOAD_KEYS))
    if twice:
        raise BadInput(f"{where}: {', '.join(twice)} set in both [matrix] and [load]; keep it in [load]")
    return {**_load_table(spec, f"{where} [matrix]"), **_load_table(load, f"{where} [load]")}


def _arm_load(value: Any, where: str) -> dict[str, dict[str, Any]]:
    """Each `[arm.<name>]`'s own load keys (names and keys checked by _arm_batch_sizes)."""
    load: dict[str, dict[str, Any]] = {}
    for arm, table in _tables(value, f"{where} [arm]").items():
        own = _load_table(table, f"{where} [arm.{arm}]")
        if own:
            load[arm] = own
    return load


def _faults(value: Any, names: list[str], where: str) -> dict[str, dict[str, Any]]:
    from kvgate.treatments.faults import check_faults

    faults = _tables(value, f"{where} [faults]")
    for arm, table in faults.items():
        if arm != "*" and arm not in names:
            raise BadInput(f"{where}: {unknown_name('arm in [faults]', arm, names)}")
        check_faults(table, f"{where} [faults.{arm}]")
    return faults
