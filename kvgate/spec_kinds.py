"""What kind of kvgate input a file is — a suite, a matrix or a policy (TOML), a trace (JSON lines) or a
Parquet file (a frozen workload or a trace) — so that one given where another kind belongs is refused
naming what it is and what takes it, not with the first key the wrong reader does not know ("unknown
key 'name'" for a suite given as --policy).

TOP_KEYS states each TOML kind's top-level keys once; the suite, matrix and policy readers check a file
against their own. A file is taken for another kind only when it holds none of the expected kind's keys
and more of that kind's than of any other's, so a policy with one misspelt key still reads "unknown key".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kvgate.errors import BadInput

TOP_KEYS: dict[str, frozenset[str]] = {
    "suite": frozenset({"name", "description", "generate", "dataset", "trace"}),
    "matrix": frozenset({"matrix", "treatment", "arm", "faults", "load"}),
    "policy": frozenset({
        "tau", "confidence", "rule", "min_control_passes", "holm", "critical", "slice_tau",
        "signal_alpha", "aa_margin", "aa_alpha", "cluster", "allow_unwinnable", "sequential", "look_every",
        "spending_power", "expected_control_pass_rate", "defects", "strata",
    }),
}  # fmt: skip
"""Each TOML spec kind → the keys its top level may hold."""

WHAT = {
    "suite": "a suite",
    "matrix": "a matrix",
    "policy": "a policy",
    "trace": "a trace (JSON lines)",
    "parquet": "a Parquet file (a frozen workload or a trace)",
    "workload": "a frozen workload",
}
GOES_TO = {
    "suite": "freeze it with `kvgate freeze SUITE.toml --model MODEL -o WORKLOAD.parquet` and give the "
    "workload to `kvgate run -w`",
    "matrix": "give it to `kvgate run -m`",
    "policy": "give it to --policy (`kvgate run`, `kvgate report`, `kvgate simulate`)",
    "trace": "name it in a suite's [[trace]] table (`kvgate init TRACE` writes such a suite)",
    "parquet": "a frozen workload goes to `kvgate run -w`, a Parquet trace into a suite's [[trace]] table",
    "workload": "give it to `kvgate run -w` (`kvgate freeze --check` verifies it)",
}
"""What to do with a file of each kind."""

PARQUET_MAGIC = b"PAR1"
"""The first (and last) four bytes of every Parquet file."""


def toml_kind(data: Mapping[str, Any], expected: str | None = None) -> str | None:
    """The TOML kind a parsed file's top level says it is, other than `expected`: it holds none of
    `expected`'s keys and more of that kind's than of any other's; None when it says no single one."""
    keys = set(data)
    if not keys or (expected is not None and keys & TOP_KEYS[expected]):
        return None
    shared = {kind: len(keys & top) for kind, top in TOP_KEYS.items() if kind != expected}
    most = max(shared.values())
    best = [kind for kind, count in shared.items() if count == most]
    return best[0] if most and len(best) == 1 else None


def refuse_other_kind(data: Mapping[str, Any], expected: str, where: str) -> None:
    """A BadInput when the TOML file `where`, read as `expected`, is another kind (`toml_kind`)."""
    found = toml_kind(data, expected)
    if found is not None:
        raise BadInput(wrong_kind(where, found, expected))


def wrong_kind(where: str, found: str, expected: str) -> str:
    """One line: what `where` is, that it is not `expected`, and what to do with it."""
    return f"{where} is {WHAT[found]}, not {WHAT[expected]}: {GOES_TO[found]}"


def text_kind(text: str) -> str | None:
    """The kind "trace" when text that is not TOML opens with a JSON object on its first line, else None."""
    first = text.lstrip().partition("\n")[0]
    if not first.startswith("{"):
        return None
    try:
        return "trace" if isinstance(json.loads(first), dict) else None
    except ValueError:
        return None


def is_parquet(head: bytes) -> bool:
    """Whether a file opening with `head` is Parquet."""
    return head.startswith(PARQUET_MAGIC)
