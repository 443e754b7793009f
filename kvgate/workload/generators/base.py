"""The generator seam: a seeded, deterministic function from parameters to case drafts."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

from kvgate.registry import Registry
from kvgate.workload.case import CaseDraft
from kvgate.workload.tokenizer import PromptTokenizer

Messages = tuple[dict[str, str], ...]


@dataclass(frozen=True, kw_only=True)
class GeneratorParams:
    """The suite keys every synthetic generator takes, each going into every draft unchanged; a
    generator's own parameters (a frozen, keyword-only dataclass) extend these."""

    per_cell: int = 1
    """Cases per cell of the generator's grid (lengths × depths, or lengths alone)."""
    max_new_tokens: int = 64
    """The generation budget of each case (each generator sets its own default)."""
    critical: bool = False
    """Whether the cases are critical: any candidate-only failure among them fails the gate."""


class Generator(Protocol):
    """`params_type` is a frozen dataclass whose fields are the suite spec's keys for this generator."""

    @property
    def name(self) -> str:
        """Its key in the registry, which builds it with that name (the name's one statement)."""
        ...

    @property
    def version(self) -> str: ...

    @property
    def params_type(self) -> type: ...

    def generate(self, params: Any, rng: random.Random, tok: PromptTokenizer) -> list[CaseDraft]: ...


GENERATORS: Registry[Generator] = Registry(
    "generator",
    lazy={
        "block_edges": "kvgate.workload.generators.block_edges:BlockEdgesGenerator",
        "code": "kvgate.workload.generators.code:CodeGenerator",
        "common_words": "kvgate.workload.generators.common_words:CommonWordsGenerator",
        "freq_words": "kvgate.workload.generators.common_words:FreqWordsGenerator",
        "kv_retrieval": "kvgate.workload.generators.kv_retrieval:KVRetrievalGenerator",
        "needle": "kvgate.workload.generators.needle:NeedleGenerator",
        "passkey": "kvgate.workload.generators.passkey:PasskeyGenerator",
        "structured_output": "kvgate.workload.generators.structured_output:StructuredOutputGenerator",
        "tool_call": "kvgate.workload.generators.tool_call:ToolCallGenerator",
        "variable_tracking": "kvgate.workload.generators.variable_tracking:VariableTrackingGenerator",
    },
)
"""Every generator by name, its module imported when a suite first names it."""


def param_names(params_type: type) -> set[str]:
    return {f.name for f in fields(params_type)}


MAX_UNITS = 1 << 24
"""`fit_to_length` gives up past this many haystack units: the prompt is not growing."""


def fit_to_length(build: Callable[[int], Messages], target_tokens: int, tok: PromptTokenizer, hi: int) -> int:
    """Largest n ≥ 0 whose prompt `build(n)` has at most `target_tokens` tokens (RULER's search).

    `build(n)` must grow monotonically in n (n = haystack units); `hi` is a first guess. A prompt's
    length is nearly affine in n, so each probe is the secant estimate inside the tightest bracket
    (extrapolated until there is one); the answer typically takes four counted prompts where bisection
    takes a dozen, and bisection takes over should the secant stall. Raises ValueError when even
    n = 0 exceeds the target, so a suite cannot silently produce prompts longer than it asked for.
    """
    base = tok.count_chat(build(0))
    if base > target_tokens:
        raise ValueError(f"the prompt without any haystack is already longer than {target_tokens} tokens")
    lo, c_lo = 0, base
    top: tuple[int, int] | None = None  # (n, count) of the smallest n known to exceed the target
    guess, probes = max(1, hi), 0
    while top is None or top[0] - lo > 1:
        if guess > MAX_UNITS:
            raise ValueError(f"the prompt does not reach {target_tokens} tokens by adding haystack")
        count = tok.count_chat(build(guess))
        probes += 1
        if count <= target_tokens:
            lo, c_lo = guess, count
        else:
            top = (guess, count)
        guess = _next_probe(lo, c_lo, top, base, target_tokens, secant=probes < 8)
    return lo


def _next_probe(lo: int, c_lo: int, top: tuple[int, int] | None, base: int, target: int, secant: bool) -> int:
    """The next n for `fit_to_length`: strictly between the bracket's ends, or beyond `lo` if unbounded."""
    if top is None:
        slope = (c_lo - base) / lo if lo else 0.0
        return lo + max(lo, 1) if slope <= 0 else lo + max(1, int((target - c_lo) / slope) + 1)
    n_top, c_top = top
    estimate = lo + (target - c_lo) * (n_top - lo) // (c_top - c_lo) if secant else (lo + n_top) // 2
    return min(max(estimate, lo + 1), n_top - 1)


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
