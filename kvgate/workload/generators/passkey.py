"""Passkey retrieval: a number hidden at a chosen depth of a haystack (Mohtashami & Jaggi, 2023).

One case per (length, depth, index). The prompt is sized in the target tokenizer's tokens by searching
the number of haystack units, as RULER does; the needle sits after `round(depth * units)` units.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.base import GeneratorParams, Messages, fit_to_length
from kvgate.workload.generators.cells import DepthCell, depth_cells, draft
from kvgate.workload.generators.common import check_depths, check_lengths, random_number
from kvgate.workload.generators.haystacks import haystack_units
from kvgate.workload.generators.prompts import user_prompt
from kvgate.workload.tokenizer import PromptTokenizer

INTRO = (
    "There is an important piece of information hidden inside a lot of irrelevant text. "
    "Find it and memorize it. I will ask you about it."
)
QUESTION = "What is the pass key? Answer with the number only."


@dataclass(frozen=True, kw_only=True)
class PasskeyParams(GeneratorParams):
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    haystack: str = "noise"
    digits: int = 5
    max_new_tokens: int = 12

    def __post_init__(self) -> None:
        check_lengths(self.lengths)
        check_depths(self.depths)
        if self.per_cell < 1 or not 1 <= self.digits <= 12:
            raise ValueError("per_cell must be ≥ 1 and digits in [1, 12]")


@dataclass(frozen=True)
class PasskeyGenerator:
    name: str
    version: str = "1"
    params_type: type = PasskeyParams

    def generate(self, params: PasskeyParams, rng: random.Random, tok: PromptTokenizer) -> list[CaseDraft]:
        cells = depth_cells(params.lengths, params.depths, params.per_cell)
        return [self._case(params, cell, rng, tok) for cell in cells]

    def _case(self, p: PasskeyParams, cell: DepthCell, rng: random.Random, tok: PromptTokenizer) -> CaseDraft:
        key = random_number(rng, p.digits)
        seed = rng.random()
        needle = f"The pass key is {key}. Remember it. {key} is the pass key."

        def build(n: int) -> Messages:
            units = haystack_units(p.haystack, n, random.Random(seed))
            at = round(cell.depth * n)
            return user_prompt(INTRO, " ".join([*units[:at], needle, *units[at:]]), QUESTION)

        return draft(
            cell,
            p,
            task="passkey",
            messages=build(fit_to_length(build, cell.length, tok, hi=max(8, cell.length // 16))),
            validator="substring_all",
            expected=[key],
            question=QUESTION,
        )
