"""Key-value retrieval over a JSON object of uuid keys and values (Liu et al. 2023, "Lost in the Middle:
How Language Models Use Long Contexts", arXiv:2307.03172, section 4).

The object grows pair by pair until the prompt reaches the target length; the asked key is the pair at
position ``round(depth * (pairs - 1))``, so `depth_bucket` says where in the object it sits. One pair is
about 75 tokens of a BPE tokenizer: the prompt lands within one pair of its target. The expected value is
judged by ``substring_all``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.base import GeneratorParams, Messages
from kvgate.workload.generators.cells import DepthCell, depth_cells, draft
from kvgate.workload.generators.common import (
    check_depths,
    check_lengths,
    check_positive,
    fit_within,
    random_uuid,
)
from kvgate.workload.generators.prompts import user_prompt
from kvgate.workload.tokenizer import PromptTokenizer

INTRO = "Extract the value corresponding to the specified key in the JSON object below."


@dataclass(frozen=True, kw_only=True)
class KVRetrievalParams(GeneratorParams):
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    max_new_tokens: int = 64

    def __post_init__(self) -> None:
        check_lengths(self.lengths, minimum=256)
        check_depths(self.depths)
        check_positive(per_cell=self.per_cell, max_new_tokens=self.max_new_tokens)


def _position(depth: float, pairs: int) -> int:
    return round(depth * (pairs - 1))


@dataclass(frozen=True)
class KVRetrievalGenerator:
    name: str
    version: str = "1"
    params_type: type = KVRetrievalParams

    def generate(
        self, params: KVRetrievalParams, rng: random.Random, tok: PromptTokenizer
    ) -> list[CaseDraft]:
        cells = depth_cells(params.lengths, params.depths, params.per_cell)
        return [self._case(params, cell, rng, tok) for cell in cells]

    def _case(
        self, p: KVRetrievalParams, cell: DepthCell, rng: random.Random, tok: PromptTokenizer
    ) -> CaseDraft:
        # uuid4s from a seeded stream: 122 random bits each, so no two collide in practice
        pool = [(random_uuid(rng), random_uuid(rng)) for _ in range(max(2, cell.length // 16))]

        def build(n: int) -> Messages:
            pairs = pool[: max(1, n)]
            key = pairs[_position(cell.depth, len(pairs))][0]
            data = json.dumps(dict(pairs), indent=1)
            return user_prompt(INTRO, f"JSON data:\n{data}", _question(key))

        n = max(1, fit_within(build, cell.length, tok, max_n=len(pool), what=f"{len(pool)} pairs"))
        key, value = pool[_position(cell.depth, n)]
        return draft(
            cell,
            p,
            task="kv_retrieval",
            messages=build(n),
            validator="substring_all",
            expected=[value],
            question=_question(key),
            pairs=n,
        )


def _question(key: str) -> str:
    return (
        f'What is the value associated with the key "{key}" in the JSON object above? '
        "Answer with the value only."
    )
