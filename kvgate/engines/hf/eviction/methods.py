"""From an eviction treatment spec to the method that scores the cache (importing each registers it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from kvgate.engines.hf.eviction.base import EVICTION_METHODS, EvictionMethod
from kvgate.engines.hf.eviction.h2o import H2O
from kvgate.engines.hf.eviction.knorm import KNorm
from kvgate.engines.hf.eviction.random_ import RandomEviction
from kvgate.engines.hf.eviction.snapkv import SnapKV
from kvgate.engines.hf.eviction.streaming import StreamingLLM
from kvgate.engines.hf.eviction.tova import TOVA
from kvgate.treatments.spec import Eviction

# The spec's fields each method reads: `window` is SnapKV's observation window and H2O's recent window.
# Values are typed Any because the frozen dataclasses' read-only `ratio` does not satisfy the protocol's
# settable `ratio: float` under mypy; make_method casts once.
FACTORIES: dict[str, Callable[[Eviction], Any]] = {
    "streaming": lambda t: StreamingLLM(t.ratio, sink_tokens=t.sink_tokens),
    "snapkv": lambda t: SnapKV(t.ratio, window=t.window),
    "h2o": lambda t: H2O(t.ratio, recent=t.window),
    "knorm": lambda t: KNorm(t.ratio),
    "tova": lambda t: TOVA(t.ratio),
    "random": lambda t: RandomEviction(t.ratio, seed=t.seed),
}


def make_method(treatment: Eviction) -> EvictionMethod:
    """The frozen method dataclass for `treatment.method` with the spec's hyper-parameters."""
    EVICTION_METHODS.get(treatment.method)  # unknown names fail here, with "did you mean"
    return cast(EvictionMethod, FACTORIES[treatment.method](treatment))
