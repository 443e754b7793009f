"""What each treatment kind offers, for `kvgate treatments`: its methods or modes, and every parameter
with its default, read from the spec dataclasses (`treatments.spec`) without importing any engine."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from kvgate.treatments.eviction_methods import EVICTION_METHODS
from kvgate.treatments.spec import CERTIFICATE_KEYS, TREATMENT_TYPES, field_choices

COMMON_EVICTION = ("ratio", "scope", "during_decoding", "convention")
"""The spec fields every eviction method reads (each reads its own `params` too)."""
CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    (kind, name): values
    for kind, spec in TREATMENT_TYPES.items()
    for name, values in field_choices(spec).items()
}
"""(kind, field) → the values its Literal type allows: the sets the spec's checks read (treatments.spec)."""


def defaults(kind: str) -> dict[str, Any]:
    """Each parameter of `kind` (engine_args and name aside) and its default."""
    out = {}
    for f in fields(TREATMENT_TYPES[kind]):
        if f.name in ("name", "engine_args"):
            continue
        if f.default is not MISSING:
            out[f.name] = f.default
        elif f.default_factory is not MISSING:
            out[f.name] = f.default_factory()
    return out


def _param(kind: str, name: str, value: Any) -> str:
    if (kind, name) == ("composite", "of"):
        return "of = [two or more treatment names, each kind once]"
    shown = str(value).lower() if isinstance(value, bool) else value
    choices = CHOICES.get((kind, name))
    return f"{name}={shown}" + (f" ({' | '.join(choices)})" if choices else "")


def relevant(settings: dict[str, Any]) -> dict[str, Any]:
    """An eviction treatment's settings that its method reads, and its certificate's when it has one (a spec
    without the certificate has none of those keys); all settings for other kinds."""
    if settings.get("kind") != "eviction" or settings.get("method") not in EVICTION_METHODS:
        return settings
    keep = {"method", *COMMON_EVICTION, *EVICTION_METHODS[settings["method"]].params, *CERTIFICATE_KEYS}
    return {k: v for k, v in settings.items() if k in keep}


def kind_rows() -> list[list[str]]:
    """[kind, method or mode, parameters with defaults, what it does] for every kind and method."""
    rows = []
    for kind, spec in TREATMENT_TYPES.items():
        params = defaults(kind)
        doc = (spec.__doc__ or "").strip().splitlines()[0]
        if kind == "eviction":
            for method, info in EVICTION_METHODS.items():
                names = (*COMMON_EVICTION, *info.params)
                rows.append(
                    [kind, method, ", ".join(_param(kind, n, params[n]) for n in names), info.summary]
                )
            continue
        shown = ", ".join(_param(kind, n, v) for n, v in params.items()) or "—"
        rows.append([kind, "—", shown, doc])
    return rows
