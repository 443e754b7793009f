"""Prompts at KV block boundaries: passkey retrieval whose prompt is exactly m·B − 1, m·B or m·B + 1
tokens long (the target tokenizer's, chat template included), for each block size B and multiple m.

Paged KV caches store and share whole blocks of B tokens (vLLM's prefix cache hashes full blocks and
always recomputes the last prompt token; an offload tier moves whole blocks), so a prompt one token
short of a block, exactly a block, or one token into the next exercises the partial-block and
last-token paths where off-by-one defects live. Each case carries the slice `block_edge` ("below",
"at", "above"; the report counts an arm's cases per edge) and `ctx_bucket` of m·B (the three edges of
one length share a bucket). A prompt is fitted with haystack units (`fit_to_length`), then padded with
filler words, one at a time, to the exact length; a length no padding reaches is an error naming it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.base import GeneratorParams, Messages, ctx_bucket, fit_to_length
from kvgate.workload.generators.common import random_number
from kvgate.workload.generators.haystacks import haystack_units
from kvgate.workload.generators.passkey import INTRO, QUESTION
from kvgate.workload.generators.prompts import user_prompt
from kvgate.workload.tokenizer import PromptTokenizer

EDGE_COLUMN = "block_edge"
EDGES = ("below", "at", "above")
OFFSETS = {"below": -1, "at": 0, "above": 1}
FILLER = "x"
MAX_PAD = 64
"""Most filler words tried to reach an exact length (a haystack unit is a sentence of a few tokens)."""
MAX_BLOCK_SIZE = 4096


@dataclass(frozen=True, kw_only=True)
class BlockEdgesParams(GeneratorParams):
    block_sizes: tuple[int, ...] = (16,)
    multiples: tuple[int, ...] = (8,)
    haystack: str = "noise"
    digits: int = 5
    max_new_tokens: int = 12

    def __post_init__(self) -> None:
        if not self.block_sizes or not all(
            isinstance(b, int) and 2 <= b <= MAX_BLOCK_SIZE for b in self.block_sizes
        ):
            raise ValueError(f"block_sizes must be integers in [2, {MAX_BLOCK_SIZE}]")
        if not self.multiples or not all(isinstance(m, int) and 1 <= m <= 1024 for m in self.multiples):
            raise ValueError("multiples must be integers in [1, 1024]")
        if self.per_cell < 1 or not 1 <= self.digits <= 12:
            raise ValueError("per_cell must be ≥ 1 and digits in [1, 12]")


@dataclass(frozen=True)
class BlockEdgesGenerator:
    name: str
    version: str = "1"
    params_type: type = BlockEdgesParams

    def generate(self, params: BlockEdgesParams, rng: random.Random, tok: PromptTokenizer) -> list[CaseDraft]:
        lengths = sorted({b * m for b in params.block_sizes for m in params.multiples})
        return [
            self._case(params, length, edge, index, rng, tok)
            for length in lengths
            for edge in EDGES
            for index in range(params.per_cell)
        ]

    def _case(
        self,
        p: BlockEdgesParams,
        aligned: int,
        edge: str,
        index: int,
        rng: random.Random,
        tok: PromptTokenizer,
    ) -> CaseDraft:
        key = random_number(rng, p.digits)
        seed = rng.random()
        needle = f"The pass key is {key}. Remember it. {key} is the pass key."
        target = aligned + OFFSETS[edge]

        def build(n: int, pad: int = 0) -> Messages:
            units = haystack_units(p.haystack, n, random.Random(seed))
            at = len(units) // 2
            context = " ".join([*units[:at], needle, *units[at:], *([FILLER] * pad)])
            return user_prompt(INTRO, context, QUESTION)

        messages = _exact(build, target, tok)
        return CaseDraft(
            task="passkey",
            messages=messages,
            validator="substring_all",
            expected=[key],
            max_new_tokens=p.max_new_tokens,
            question=QUESTION,
            critical=p.critical,
            slices={"ctx_bucket": ctx_bucket(aligned), EDGE_COLUMN: edge},
            params={"length": target, "block_length": aligned, "edge": edge, "index": index},
        )


def _exact(build: Callable[[int, int], Messages], target: int, tok: PromptTokenizer) -> Messages:
    """`build(n, pad)` at exactly `target` tokens: the most haystack units that fit, then filler."""
    n = fit_to_length(lambda units: build(units, 0), target, tok, hi=max(8, target // 16))
    for units in range(n, max(-1, n - 4), -1):
        for pad in range(MAX_PAD + 1):
            count = tok.count_chat(build(units, pad))
            if count == target:
                return build(units, pad)
            if count > target:
                break
    raise ValueError(f"no prompt of exactly {target} tokens: filler words skip that length")
