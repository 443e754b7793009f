"""Aggregation tasks, RULER-style (Hsieh et al. 2024, arXiv:2404.06654): the answer depends on the
whole context, not on one needle.

- ``common_words`` (CWE): a numbered list of words in which ``num_common`` words occur
  ``freq_common`` times each and the rest ``freq_uncommon`` times each; the answer is the common words.
  The list grows by uncommon words until the prompt reaches the target length; the built-in vocabulary
  (~470 plain English words) reaches about 5K tokens at ``freq_uncommon = 3``, and longer targets need a
  larger ``freq_uncommon`` (the generator says so rather than produce a short prompt).
- ``freq_words`` (FWE): a "coded text" of random six-letter words drawn from a Zipf distribution
  (exponent ``alpha``); the answer is the ``top_k`` most frequent words, whose counts are checked to be
  strictly above every other word's.

Both are judged by ``substring_all``; no expected word is a substring of another word in the case.
"""

from __future__ import annotations

import random
import string
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.base import GeneratorParams, Messages
from kvgate.workload.generators.cells import Cell, cells, draft
from kvgate.workload.generators.common import (
    ENGLISH_WORDS,
    check_lengths,
    check_positive,
    distinct,
    fit_within,
)
from kvgate.workload.generators.prompts import user_prompt
from kvgate.workload.tokenizer import PromptTokenizer


@dataclass(frozen=True, kw_only=True)
class CommonWordsParams(GeneratorParams):
    lengths: tuple[int, ...]
    num_common: int = 10
    freq_common: int | None = None
    """Occurrences of each common word; None picks the largest (≤ 30, as RULER) for which the common
    words fill at most 40% of the target length."""
    freq_uncommon: int = 3
    max_new_tokens: int = 128

    def __post_init__(self) -> None:
        check_lengths(self.lengths, minimum=128)
        check_positive(
            num_common=self.num_common,
            freq_uncommon=self.freq_uncommon,
            per_cell=self.per_cell,
            max_new_tokens=self.max_new_tokens,
        )
        if self.freq_common is not None and (
            not isinstance(self.freq_common, int) or self.freq_common <= self.freq_uncommon
        ):
            raise ValueError("freq_common must be an integer greater than freq_uncommon")


CWE_INTRO = (
    "Below is a numbered list of words. Some of the words appear more often than the others. "
    "Memorize the ones that appear most often."
)


def _numbered(words: list[str]) -> str:
    return " ".join(f"{i}. {w}" for i, w in enumerate(words, 1))


@dataclass(frozen=True)
class CommonWordsGenerator:
    name: str
    version: str = "1"
    params_type: type = CommonWordsParams

    def generate(
        self, params: CommonWordsParams, rng: random.Random, tok: PromptTokenizer
    ) -> list[CaseDraft]:
        return [self._case(params, cell, rng, tok) for cell in cells(params.lengths, params.per_cell)]

    def _case(self, p: CommonWordsParams, cell: Cell, rng: random.Random, tok: PromptTokenizer) -> CaseDraft:
        k = p.num_common
        common = distinct(lambda: rng.choice(ENGLISH_WORDS), k)
        uncommon = [w for w in ENGLISH_WORDS if not any(w in c or c in w for c in common)]
        rng.shuffle(uncommon)
        seed = rng.random()
        question = (
            f"What are the {k} most common words in the list above? "
            "Answer with the words only, separated by commas."
        )

        def build(n: int, fc: int) -> Messages:
            words = common * fc + uncommon[:n] * p.freq_uncommon
            random.Random(seed).shuffle(words)
            return user_prompt(CWE_INTRO, _numbered(words), question)

        fc = p.freq_common or _auto_freq(lambda f: build(0, f), p.freq_uncommon, cell.length, tok)
        n = fit_within(
            lambda m: build(m, fc),
            cell.length,
            tok,
            max_n=len(uncommon),
            what=f"all {len(uncommon)} uncommon words (raise freq_uncommon for longer lists)",
        )
        return draft(
            cell,
            p,
            task="cwe",
            messages=build(n, fc),
            validator="substring_all",
            expected=common,
            question=question,
            num_common=k,
            freq_common=fc,
            freq_uncommon=p.freq_uncommon,
        )


def _auto_freq(
    common_only: Callable[[int], Messages], freq_uncommon: int, length: int, tok: PromptTokenizer
) -> int:
    """Largest frequency in (freq_uncommon, 30] whose common-words-only prompt fits in 40% of `length`."""
    best = None
    for f in range(freq_uncommon + 1, 31):
        if tok.count_chat(common_only(f)) > 0.4 * length:
            break
        best = f
    if best is None:
        raise ValueError(f"{length} tokens are too few for the common words; set freq_common or lengths")
    return best


@dataclass(frozen=True, kw_only=True)
class FreqWordsParams(GeneratorParams):
    lengths: tuple[int, ...]
    top_k: int = 3
    alpha: float = 2.0
    vocab_size: int = 2000
    max_new_tokens: int = 64

    def __post_init__(self) -> None:
        check_lengths(self.lengths, minimum=128)
        check_positive(
            top_k=self.top_k,
            vocab_size=self.vocab_size,
            per_cell=self.per_cell,
            max_new_tokens=self.max_new_tokens,
        )
        if not isinstance(self.alpha, int | float) or self.alpha <= 1.0:
            raise ValueError(f"alpha must be a number > 1, got {self.alpha!r}")
        if self.vocab_size <= self.top_k:
            raise ValueError("vocab_size must exceed top_k")


FWE_INTRO = "Read the coded text below and keep count of how often each coded word appears."


def _coded_vocab(rng: random.Random, size: int) -> list[str]:
    """`size` distinct random six-letter words (equal lengths: none is a substring of another)."""
    seen: dict[str, None] = {}
    while len(seen) < size:
        seen["".join(rng.choice(string.ascii_lowercase) for _ in range(6))] = None
    return list(seen)


@dataclass(frozen=True)
class FreqWordsGenerator:
    name: str
    version: str = "1"
    params_type: type = FreqWordsParams

    def generate(self, params: FreqWordsParams, rng: random.Random, tok: PromptTokenizer) -> list[CaseDraft]:
        cum = list(accumulate(1.0 / r**params.alpha for r in range(1, params.vocab_size + 1)))
        return [self._case(params, cum, cell, rng, tok) for cell in cells(params.lengths, params.per_cell)]

    def _case(
        self, p: FreqWordsParams, cum: list[float], cell: Cell, rng: random.Random, tok: PromptTokenizer
    ) -> CaseDraft:
        k = p.top_k
        question = (
            f"What are the {k} most frequent coded words in the text above? "
            "Answer with the words only, separated by commas."
        )
        for _attempt in range(20):
            stream = rng.choices(
                _coded_vocab(rng, p.vocab_size), cum_weights=cum, k=cell.length
            )  # ≥ 1 token a word

            def build(n: int, stream: list[str] = stream) -> Messages:
                return user_prompt(FWE_INTRO, " ".join(stream[:n]), question)

            n = fit_within(build, cell.length, tok, max_n=len(stream), what="the coded text")
            ranked = Counter(stream[:n]).most_common()
            if len(ranked) > k and ranked[k - 1][1] > ranked[k][1]:
                break
        else:
            raise ValueError(f"no unambiguous top {k} in 20 draws; lower top_k or raise alpha")
        return draft(
            cell,
            p,
            task="fwe",
            messages=build(n),
            validator="substring_all",
            expected=[w for w, _ in ranked[:k]],
            question=question,
            top_k=k,
            alpha=p.alpha,
        )
