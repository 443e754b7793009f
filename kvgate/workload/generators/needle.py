"""Needle in a haystack, RULER-style (Hsieh et al. 2024, "RULER: What's the Real Context Size of Your
Long-Context Language Models?", arXiv:2404.06654, the NIAH family).

Needles read "One of the special magic {numbers|words|uuids} for {key} is: {value}." and hide in a
"noise" or "essay" haystack sized, word by word, to the target token count. Variants:

- ``single``: one needle, one key asked.
- ``multikey``: ``num_needles`` needles with different keys; one key asked, the others distract.
- ``multivalue``: ``num_needles`` needles with the same key and different values; all must be returned.
- ``multiquery``: ``num_needles`` needles with different keys; all keys asked, all values returned.
- ``shared``: ``num_needles`` needles with different keys in one haystack, and one case per key, each
  asking for that key alone. The cases of a cell differ only in their question, so they share their
  whole context and one ``prefix_group``: the workload for prefix and span reuse arms, where a stale or
  foreign reused block shows up as a wrong answer. A case's depth is its own needle's depth.

The first needle the answer needs sits at the cell's depth (its `depth_bucket`); the other needles sit
at seeded random depths (for ``shared``, evenly from the cell's depth on, wrapping past the end).
The expected answer is the list of values, judged by ``substring_all``
(RULER's ``string_match_all``).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.base import GeneratorParams
from kvgate.workload.generators.cells import DepthCell, depth_cells, draft
from kvgate.workload.generators.common import (
    check_choice,
    check_depths,
    check_lengths,
    check_positive,
    distinct,
    join_words,
    random_compound,
    random_number,
    random_uuid,
)
from kvgate.workload.generators.haystacks import HAYSTACKS
from kvgate.workload.generators.prompts import fit_haystack, haystack_prompt, user_prompt
from kvgate.workload.tokenizer import PromptTokenizer

VARIANTS = ("single", "multikey", "multivalue", "multiquery", "shared")
VALUE_TYPES = ("number", "word", "uuid")
_PLURAL = {"number": "numbers", "word": "words", "uuid": "uuids"}


@dataclass(frozen=True, kw_only=True)
class NeedleParams(GeneratorParams):
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    variant: str = "single"
    value_type: str = "number"
    key_type: str = "word"
    num_needles: int | None = None
    """Needles per case for the multi variants (default 4, as RULER); must be unset for "single"."""
    haystack: str = "essay"
    max_new_tokens: int = 128

    def __post_init__(self) -> None:
        check_lengths(self.lengths, minimum=128)
        check_depths(self.depths)
        check_choice("variant", self.variant, VARIANTS)
        check_choice("value_type", self.value_type, VALUE_TYPES)
        check_choice("key_type", self.key_type, VALUE_TYPES)
        check_choice("haystack", self.haystack, HAYSTACKS)
        check_positive(per_cell=self.per_cell, max_new_tokens=self.max_new_tokens)
        if self.variant == "single" and self.num_needles is not None:
            raise ValueError("num_needles applies to the multi variants only")
        if self.num_needles is not None and (not isinstance(self.num_needles, int) or self.num_needles < 2):
            raise ValueError(f"num_needles must be an integer ≥ 2, got {self.num_needles!r}")

    @property
    def needles(self) -> int:
        return 1 if self.variant == "single" else (self.num_needles or 4)


def _maker(kind: str, rng: random.Random) -> Callable[[], str]:
    if kind == "number":
        return lambda: random_number(rng, 7)
    if kind == "uuid":
        return lambda: random_uuid(rng)
    return lambda: random_compound(rng)


@dataclass(frozen=True)
class NeedleGenerator:
    name: str
    version: str = "1"
    params_type: type = NeedleParams

    def generate(self, params: NeedleParams, rng: random.Random, tok: PromptTokenizer) -> list[CaseDraft]:
        cells = depth_cells(params.lengths, params.depths, params.per_cell)
        if params.variant == "shared":
            return [case for cell in cells for case in self._shared(params, cell, rng, tok)]
        return [self._case(params, cell, rng, tok) for cell in cells]

    def _case(self, p: NeedleParams, cell: DepthCell, rng: random.Random, tok: PromptTokenizer) -> CaseDraft:
        n = p.needles
        n_keys = 1 if p.variant in ("single", "multivalue") else n
        keys = distinct(_maker(p.key_type, rng), n_keys)
        n_values = n if p.variant != "single" else 1
        values = distinct(_maker(p.value_type, rng), n_values, avoid=set(keys))
        if p.variant == "multivalue":
            pairs = [(keys[0], v) for v in values]
            asked, answer = [keys[0]], values
        elif p.variant == "multikey":
            pairs = list(zip(keys, values, strict=True))
            asked, answer = [keys[0]], [values[0]]
        else:  # single, multiquery: every key asked
            pairs = list(zip(keys, values, strict=True))
            asked, answer = keys, values
        noun = _PLURAL[p.value_type]
        needles = [_needle(noun, k, v) for k, v in pairs]
        # the first needle of the answer at the cell's depth; the rest, answers and distractors, anywhere
        depths = [cell.depth, *(rng.random() for _ in needles[1:])]
        order = list(range(len(needles)))
        rng.shuffle(order)  # so the answer needle is not always inserted first at a shared boundary
        seed = rng.random()
        intro, question = _intro(noun), _question(noun, asked)
        messages = haystack_prompt(
            lambda context: user_prompt(intro, context, question),
            p.haystack,
            [(depths[i], needles[i]) for i in order],
            seed,
            cell.length,
            tok,
        )
        return draft(
            cell,
            p,
            task=f"niah_{p.variant}",
            messages=messages,
            validator="substring_all",
            expected=answer,
            question=question,
            variant=p.variant,
            key_type=p.key_type,
            value_type=p.value_type,
            needles=n,
            haystack=p.haystack,
        )

    def _shared(
        self, p: NeedleParams, cell: DepthCell, rng: random.Random, tok: PromptTokenizer
    ) -> list[CaseDraft]:
        """One case per needle over one context, sized for the question with the most tokens."""
        n = p.needles
        keys = distinct(_maker(p.key_type, rng), n)
        values = distinct(_maker(p.value_type, rng), n, avoid=set(keys))
        noun = _PLURAL[p.value_type]
        depths = [(cell.depth + i / n) % 1.0 for i in range(n)]
        seed = rng.random()
        intro, questions = _intro(noun), [_question(noun, [k]) for k in keys]
        longest = max(questions, key=lambda q: tok.count_chat(user_prompt(intro, "", q)))
        needles = [(d, _needle(noun, k, v)) for d, k, v in zip(depths, keys, values, strict=True)]
        context = fit_haystack(
            lambda c: user_prompt(intro, c, longest), p.haystack, needles, seed, cell.length, tok
        )
        group = "niah-shared-" + hashlib.sha256(context.encode()).hexdigest()[:12]
        return [
            replace(
                draft(
                    DepthCell(cell.length, cell.index, round(depths[i], 6)),
                    p,
                    task="niah_shared",
                    messages=user_prompt(intro, context, questions[i]),
                    validator="substring_all",
                    expected=[values[i]],
                    question=questions[i],
                    variant=p.variant,
                    key_type=p.key_type,
                    value_type=p.value_type,
                    needles=n,
                    haystack=p.haystack,
                    cell_depth=cell.depth,
                    query=i,
                ),
                prefix_group=group,
            )
            for i in range(n)
        ]


def _needle(noun: str, key: str, value: str) -> str:
    return f"One of the special magic {noun} for {key} is: {value}."


def _intro(noun: str) -> str:
    return (
        f"Some special magic {noun} are hidden within the following text. Make sure to memorize them. "
        f"I will quiz you about the {noun} afterwards."
    )


def _question(noun: str, asked: list[str]) -> str:
    return (
        f"What are all the special magic {noun} for {join_words(asked)} mentioned in the provided text? "
        f"Answer with the {noun} only."
    )
