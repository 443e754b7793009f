"""Every eviction method kvgate knows, in one table read without importing torch: what it keeps (with
its paper), the spec fields it reads, whether it scores with the prompt's queries, and the frozen
dataclass in `engines/hf/eviction/` that implements it (imported only when an engine builds it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from kvgate.registry import Registry


@dataclass(frozen=True)
class EvictionMethodInfo:
    summary: str
    """What the method keeps, citing its paper."""
    method: str
    """"module:Class" of its frozen dataclass, built as Class(ratio, **params)."""
    params: dict[str, str] = field(default_factory=dict)
    """Eviction spec field it reads besides ratio → the dataclass parameter it becomes."""
    needs_queries: bool = False
    """Whether it scores with the prompt's queries (the hf engine captures them during prefill)."""
    budgeted: bool = False
    """Whether its budgets differ by head or layer (eviction/budgets.py, eviction/head_mask.py)."""


EVICTION_METHODS: Registry[EvictionMethodInfo] = Registry(
    "eviction method",
    records={
        "streaming": EvictionMethodInfo(
            "StreamingLLM: attention sinks and the most recent entries (Xiao et al. 2023)",
            "kvgate.engines.hf.eviction.streaming:StreamingLLM",
            {"sink_tokens": "sink_tokens"},
        ),
        "snapkv": EvictionMethodInfo(
            "SnapKV: what the last `window` prompt queries attend to, pooled (Li et al. 2024)",
            "kvgate.engines.hf.eviction.snapkv:SnapKV",
            {"window": "window"},
            needs_queries=True,
        ),
        "h2o": EvictionMethodInfo(
            "H2O: heavy hitters by accumulated attention plus `window` recent (Zhang et al. 2023)",
            "kvgate.engines.hf.eviction.h2o:H2O",
            {"window": "recent"},
            needs_queries=True,
        ),
        "knorm": EvictionMethodInfo(
            "Knorm: the keys with the smallest L2 norm (Devoto et al. 2024)",
            "kvgate.engines.hf.eviction.knorm:KNorm",
        ),
        "tova": EvictionMethodInfo(
            "TOVA: what the last query attends to most (Oren et al. 2024)",
            "kvgate.engines.hf.eviction.tova:TOVA",
            needs_queries=True,
        ),
        "adakv": EvictionMethodInfo(
            "AdaKV: SnapKV's scores, the layer's budget shared among its heads by score (Feng et al. 2024)",
            "kvgate.engines.hf.eviction.adakv:AdaKV",
            {"window": "window"},
            needs_queries=True,
            budgeted=True,
        ),
        "pyramidkv": EvictionMethodInfo(
            "PyramidKV: SnapKV's scores, budgets falling linearly from the lowest layer (Cai et al. 2024)",
            "kvgate.engines.hf.eviction.pyramidkv:PyramidKV",
            {"window": "window"},
            needs_queries=True,
            budgeted=True,
        ),
        "random": EvictionMethodInfo(
            "random entries: the baseline every scoring method must beat",
            "kvgate.engines.hf.eviction.random_:RandomEviction",
            {"seed": "seed"},
        ),
    },
)

if TYPE_CHECKING:
    EvictionMethodName = str
else:
    EvictionMethodName = Literal[tuple(EVICTION_METHODS)]
"""The `method` an eviction spec may name: the table is the one statement of each name, and this Literal
is built from its keys, for the spec's check, `kvgate treatments` and the report schema (mypy: a str)."""
