"""Haystack text for retrieval tasks.

"noise" is the repeated filler of the passkey test (Mohtashami & Jaggi, 2023, "Landmark Attention").
"essay" draws from `essays.txt` beside this file: plain prose written for kvgate.
"""

from __future__ import annotations

import random
from functools import cache
from pathlib import Path

NOISE = (
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
)


@cache
def essay_sentences() -> tuple[str, ...]:
    text = (Path(__file__).with_name("essays.txt")).read_text(encoding="utf-8")
    return tuple(s.strip() + "." for s in text.replace("\n", " ").split(".") if s.strip())


def haystack_units(kind: str, n: int, rng: random.Random) -> list[str]:
    """`n` haystack units of `kind` ("noise" or "essay"); essay units start at a seeded offset."""
    if kind == "noise":
        return [NOISE] * n
    if kind == "essay":
        sentences = essay_sentences()
        start = rng.randrange(len(sentences))
        return [sentences[(start + i) % len(sentences)] for i in range(n)]
    raise ValueError(f"unknown haystack {kind!r}; known: 'noise', 'essay'")
