"""The generator seam: a seeded, deterministic function from parameters to case drafts."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, Protocol

from kvgate.registry import Registry
from kvgate.workload.case import CaseDraft
from kvgate.workload.tokenizer import PromptTokenizer

Messages = tuple[dict[str, str], ...]


class Generator(Protocol):
    """`params_type` is a frozen dataclass whose fields are the suite spec's keys for this generator."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def params_type(self) -> type: ...

    def generate(self, params: Any, rng: random.Random, tok: PromptTokenizer) -> list[CaseDraft]: ...


GENERATORS: Registry[Generator] = Registry("generator")


def param_names(params_type: type) -> set[str]:
    return {f.name for f in fields(params_type)}


def fit_to_length(build: Callable[[int], Messages], target_tokens: int, tok: PromptTokenizer, hi: int) -> int:
    """Largest n in [0, hi] whose prompt `build(n)` has at most `target_tokens` tokens (RULER's search).

    `build(n)` must grow monotonically in n (n = haystack units). Raises ValueError when even n = 0
    exceeds the target, so a suite cannot silently produce prompts longer than it asked for.
    """
    if tok.count_chat(build(0)) > target_tokens:
        raise ValueError(f"the prompt without any haystack is already longer than {target_tokens} tokens")
    lo = 0
    while tok.count_chat(build(hi)) <= target_tokens:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if tok.count_chat(build(mid)) <= target_tokens:
            lo = mid
        else:
            hi = mid
    return lo


def bucket(value: float, edges: Sequence[float], labels: Sequence[str]) -> str:
    """The label of the first edge that `value` does not exceed (len(labels) == len(edges) + 1)."""
    for edge, label in zip(edges, labels, strict=False):
        if value <= edge:
            return label
    return labels[-1]


def ctx_bucket(target_tokens: int) -> str:
    """Context-length slice label, e.g. 1024 → "1k", 512 → "512", 4096 → "4k"."""
    return (
        f"{target_tokens // 1024}k"
        if target_tokens >= 1024 and target_tokens % 1024 == 0
        else str(target_tokens)
    )


def depth_bucket(depth: float) -> str:
    """Needle depth slice: "start" (≤ 20%), "middle" (20–80%), "end" (> 80%)."""
    return bucket(depth, [0.2, 0.8], ["start", "middle", "end"])
