"""How a synthetic prompt is assembled: an intro, the long context, then the question.

`haystack_prompt` is the sizing shared by the generators that hide sentences in a word haystack;
`fit_haystack` gives the sized context alone, for cases that share it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from kvgate.workload.generators.base import Messages, fit_to_length
from kvgate.workload.generators.haystacks import haystack_words, place
from kvgate.workload.tokenizer import PromptTokenizer


def user_prompt(intro: str, context: str, question: str) -> Messages:
    """One user message: `intro`, `context` and `question`, separated by blank lines."""
    return ({"role": "user", "content": f"{intro}\n\n{context}\n\n{question}"},)


def haystack_prompt(
    frame: Callable[[str], Messages],
    haystack: str,
    needles: Sequence[tuple[float, str]],
    seed: float,
    length: int,
    tok: PromptTokenizer,
) -> Messages:
    """`frame(context)` at most `length` tokens long, the context a `haystack` of as many words as fit
    with each (depth, sentence) of `needles` placed in it; `seed` fixes where an essay starts."""
    return frame(fit_haystack(frame, haystack, needles, seed, length, tok))


def fit_haystack(
    frame: Callable[[str], Messages],
    haystack: str,
    needles: Sequence[tuple[float, str]],
    seed: float,
    length: int,
    tok: PromptTokenizer,
) -> str:
    """The context of `haystack_prompt`: the longest haystack with `needles` that fits `frame`."""

    def context(n: int) -> str:
        return place(haystack_words(haystack, n, random.Random(seed)), needles)

    return context(fit_to_length(lambda n: frame(context(n)), length, tok, hi=max(8, length // 2)))
