"""Passkey retrieval: a number hidden at a chosen depth of a haystack (Mohtashami & Jaggi, 2023).

One case per (length, depth, index). The prompt is sized in the target tokenizer's tokens by searching
the number of haystack units, as RULER does; the needle sits after `round(depth * units)` units.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.base import GENERATORS, Messages, ctx_bucket, depth_bucket, fit_to_length
from kvgate.workload.generators.haystacks import haystack_units
from kvgate.workload.tokenizer import PromptTokenizer

INTRO = (
    "There is an important piece of information hidden inside a lot of irrelevant text. "
    "Find it and memorize it. I will ask you about it."
)
QUESTION = "What is the pass key? Answer with the number only."


@dataclass(frozen=True)
class PasskeyParams:
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    per_cell: int = 1
    haystack: str = "noise"
    digits: int = 5
    max_new_tokens: int = 12
    critical: bool = False

    def __post_init__(self) -> None:
        if not self.lengths or any(n < 64 for n in self.lengths):
            raise ValueError("lengths must be a non-empty list of token counts ≥ 64")
        if not self.depths or any(not 0.0 <= d <= 1.0 for d in self.depths):
            raise ValueError("depths must be a non-empty list of fractions in [0, 1]")
        if self.per_cell < 1 or not 1 <= self.digits <= 12:
            raise ValueError("per_cell must be ≥ 1 and digits in [1, 12]")


@dataclass(frozen=True)
class PasskeyGenerator:
    name: str = "passkey"
    version: str = "1"
    params_type: type = PasskeyParams

    def generate(self, params: PasskeyParams, rng: random.Random, tok: PromptTokenizer) -> list[CaseDraft]:
        drafts = []
        for length in params.lengths:
            for depth in params.depths:
                for index in range(params.per_cell):
                    key = str(rng.randrange(10 ** (params.digits - 1), 10**params.digits))
                    seed = rng.random()

                    def build(n: int, key: str = key, depth: float = depth, seed: float = seed) -> Messages:
                        units = haystack_units(params.haystack, n, random.Random(seed))
                        at = round(depth * n)
                        needle = f"The pass key is {key}. Remember it. {key} is the pass key."
                        body = " ".join([*units[:at], needle, *units[at:]])
                        return ({"role": "user", "content": f"{INTRO}\n\n{body}\n\n{QUESTION}"},)

                    messages = build(fit_to_length(build, length, tok, hi=max(8, length // 16)))
                    drafts.append(
                        CaseDraft(
                            task="passkey",
                            messages=messages,
                            validator="substring_all",
                            expected=[key],
                            max_new_tokens=params.max_new_tokens,
                            question=QUESTION,
                            critical=params.critical,
                            slices={"ctx_bucket": ctx_bucket(length), "depth_bucket": depth_bucket(depth)},
                            params={"length": length, "depth": depth, "index": index},
                        )
                    )
        return drafts


GENERATORS.register("passkey", PasskeyGenerator())
