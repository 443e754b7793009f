"""Haystack text for retrieval tasks.

"noise" is the repeated filler of the passkey test (Mohtashami & Jaggi, 2023, "Landmark Attention").
"essay" draws from `essays.txt` beside this file: plain prose written for kvgate.

Two granularities: `haystack_units` gives whole sentences (the passkey generator's unit), and
`haystack_words` gives single words, as RULER sizes its essay haystacks, so that a prompt can be fitted
to within about one word of its target length. `place` inserts needles into a word haystack at sentence
boundaries chosen by depth.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from functools import cache
from pathlib import Path

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
HAYSTACKS = ("noise", "essay")
_SENTENCE_ENDS = frozenset(".?!")


@cache
def essay_sentences() -> tuple[str, ...]:
    text = (Path(__file__).with_name("essays.txt")).read_text(encoding="utf-8")
    return tuple(s.strip() + "." for s in text.replace("\n", " ").split(".") if s.strip())


@cache
def essay_words() -> tuple[str, ...]:
    """The essays as one stream of whitespace-separated words (titles included)."""
    return tuple((Path(__file__).with_name("essays.txt")).read_text(encoding="utf-8").split())


@cache
def essay_sentence_starts() -> tuple[int, ...]:
    """The positions in `essay_words` where a sentence starts (the first word, and each after a '.')."""
    words = essay_words()
    return (0, *(i + 1 for i, w in enumerate(words[:-1]) if w.endswith(".")))


def haystack_units(kind: str, n: int, rng: random.Random) -> list[str]:
    """`n` haystack units of `kind` ("noise" or "essay"); essay units start at a seeded offset."""
    if kind == "noise":
        return [NOISE] * n
    if kind == "essay":
        sentences = essay_sentences()
        start = rng.randrange(len(sentences))
        return [sentences[(start + i) % len(sentences)] for i in range(n)]
    raise ValueError(f"unknown haystack {kind!r}; known: 'noise', 'essay'")


def haystack_words(kind: str, n: int, rng: random.Random) -> list[str]:
    """The first `n` words of a haystack stream of `kind`; essays start at a seeded sentence start.

    The stream depends only on `rng`'s state, so a longer haystack extends a shorter one.
    """
    if kind == "noise":
        words: Sequence[str] = NOISE.split()
        start = 0
    elif kind == "essay":
        words = essay_words()
        start = rng.choice(essay_sentence_starts())
    else:
        raise ValueError(f"unknown haystack {kind!r}; known: 'noise', 'essay'")
    return [words[(start + i) % len(words)] for i in range(n)]


def place(words: Sequence[str], needles: Sequence[tuple[float, str]]) -> str:
    """Join `words`, inserting each (depth, text) needle at the sentence boundary nearest to
    `depth * len(words)`; needles at the same boundary keep their given order."""
    boundaries = [0, *(i + 1 for i, w in enumerate(words) if w[-1:] in _SENTENCE_ENDS)]
    if boundaries[-1] != len(words):
        boundaries.append(len(words))
    at: dict[int, list[str]] = {}
    for depth, text in needles:
        target = depth * len(words)
        k = bisect.bisect_left(boundaries, target)  # the nearest boundary, the lower one on a tie
        spot = (
            boundaries[k - 1]
            if k == len(boundaries) or (k and target - boundaries[k - 1] <= boundaries[k] - target)
            else boundaries[k]
        )
        at.setdefault(spot, []).append(text)
    out: list[str] = []
    previous = 0
    for spot in sorted(at):
        out.extend(words[previous:spot])
        out.extend(at[spot])
        previous = spot
    out.extend(words[previous:])
    return " ".join(out)
