"""Variable tracking, RULER-style (Hsieh et al. 2024, arXiv:2404.06654, "multi-hop tracing").

Each chain starts with ``VAR X = 12345.`` and continues with ``num_hops`` copies such as
``VAR Y = VAR X.``; ``num_chains - 1`` distractor chains carry other values. The statements hide in a
haystack at seeded random depths, each chain's statements in order. The question asks for every
variable holding the first chain's value; the answer is all ``num_hops + 1`` names of that chain,
judged by ``substring_all``.
"""

from __future__ import annotations

import itertools
import random
import string
from dataclasses import dataclass
from functools import cache

from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.base import GeneratorParams
from kvgate.workload.generators.cells import Cell, cells, draft
from kvgate.workload.generators.common import (
    check_choice,
    check_lengths,
    check_positive,
    distinct,
    random_number,
)
from kvgate.workload.generators.haystacks import HAYSTACKS, essay_words
from kvgate.workload.generators.prompts import haystack_prompt, user_prompt
from kvgate.workload.tokenizer import PromptTokenizer

INTRO = "Memorize and track the chain(s) of variable assignment hidden in the following text."


@dataclass(frozen=True, kw_only=True)
class VariableTrackingParams(GeneratorParams):
    lengths: tuple[int, ...]
    num_chains: int = 1
    num_hops: int = 4
    haystack: str = "noise"
    max_new_tokens: int = 64

    def __post_init__(self) -> None:
        check_lengths(self.lengths, minimum=128)
        check_positive(
            num_chains=self.num_chains,
            num_hops=self.num_hops,
            per_cell=self.per_cell,
            max_new_tokens=self.max_new_tokens,
        )
        check_choice("haystack", self.haystack, HAYSTACKS)


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_uppercase) for _ in range(5))


@dataclass(frozen=True)
class VariableTrackingGenerator:
    name: str
    version: str = "1"
    params_type: type = VariableTrackingParams

    def generate(
        self, params: VariableTrackingParams, rng: random.Random, tok: PromptTokenizer
    ) -> list[CaseDraft]:
        return [self._case(params, cell, rng, tok) for cell in cells(params.lengths, params.per_cell)]

    def _case(
        self, p: VariableTrackingParams, cell: Cell, rng: random.Random, tok: PromptTokenizer
    ) -> CaseDraft:
        per_chain = p.num_hops + 1
        names = distinct(lambda: _name(rng), p.num_chains * per_chain)
        while any(n.lower() in _essay_text() for n in names):  # a name the essay contains could be echoed
            names = distinct(lambda: _name(rng), p.num_chains * per_chain)
        values = distinct(lambda: random_number(rng, 5), p.num_chains)
        chains = [names[c * per_chain : (c + 1) * per_chain] for c in range(p.num_chains)]
        statements = [
            [f"VAR {chain[0]} = {value}.", *(f"VAR {b} = VAR {a}." for a, b in itertools.pairwise(chain))]
            for chain, value in zip(chains, values, strict=True)
        ]
        # random sorted depths, dealt to the chains in a random interleaving, each chain in order
        slots = [c for c in range(p.num_chains) for _ in range(per_chain)]
        rng.shuffle(slots)
        depths = sorted(rng.random() for _ in slots)
        taken = [0] * p.num_chains
        needles = []
        for depth, c in zip(depths, slots, strict=True):
            needles.append((depth, statements[c][taken[c]]))
            taken[c] += 1
        seed = rng.random()
        question = (
            f"Find all variables that are assigned the value {values[0]} in the text above. "
            "Answer with the variable names only, separated by commas."
        )
        messages = haystack_prompt(
            lambda context: user_prompt(INTRO, context, question), p.haystack, needles, seed, cell.length, tok
        )
        return draft(
            cell,
            p,
            task="variable_tracking",
            messages=messages,
            validator="substring_all",
            expected=chains[0],
            question=question,
            num_chains=p.num_chains,
            num_hops=p.num_hops,
            haystack=p.haystack,
        )


@cache
def _essay_text() -> str:
    return " ".join(essay_words()).lower()
