"""From an eviction treatment spec to the method that scores the cache, through the one table of
eviction methods (`treatments/eviction_methods.py`)."""

from __future__ import annotations

from typing import cast

from kvgate.engines.hf.eviction.base import EvictionMethod
from kvgate.registry import load
from kvgate.treatments.eviction_methods import EVICTION_METHODS
from kvgate.treatments.spec import Eviction


def method_class(name: str) -> type:
    """The frozen dataclass implementing eviction method `name` (imported on first use)."""
    cls: type = load(EVICTION_METHODS[name].method)  # an unknown name: "did you mean"
    return cls


def make_method(treatment: Eviction) -> EvictionMethod:
    """The frozen method dataclass for `treatment.method` with the spec's hyper-parameters. The
    dataclasses' read-only `ratio` does not satisfy the protocol's settable one under mypy: cast once."""
    cls = method_class(treatment.method)  # an unknown name fails here, with "did you mean"
    mapped = EVICTION_METHODS[treatment.method].params
    params = {param: getattr(treatment, spec_field) for spec_field, param in mapped.items()}
    return cast(EvictionMethod, cls(treatment.ratio, **params))
