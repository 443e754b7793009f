"""`fit_to_length` finds the largest haystack that fits, in few counted prompts, for any monotone growth."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest

from kvgate.workload.generators.base import Messages, fit_to_length


class CountingTokenizer:
    """Counts `f(n)` tokens for the prompt `build(n)`, and how many prompts it was asked to count."""

    name = "counting"

    def __init__(self, f: Callable[[int], int]) -> None:
        self.f = f
        self.calls = 0

    def count_chat(self, messages: Sequence[dict[str, str]]) -> int:
        self.calls += 1
        return self.f(int(messages[0]["content"]))

    def encode_chat(self, messages: Sequence[dict[str, str]]) -> list[int]:
        return [0] * self.count_chat(messages)

    def question_start(self, messages: Sequence[dict[str, str]], question: str) -> int | None:
        return None


def build(n: int) -> Messages:
    return ({"role": "user", "content": str(n)},)


def brute_force(f: Callable[[int], int], target: int) -> int:
    n = 0
    while f(n + 1) <= target:
        n += 1
    return n


GROWTHS: dict[str, Callable[[int], int]] = {
    "affine": lambda n: 99 + 24 * n,
    "affine with jitter": lambda n: 60 + 17 * n + (n * 7919) % 5,
    "quadratic": lambda n: 30 + n * n,
    "concave": lambda n: 10 + int(400 * math.sqrt(n)),
    "plateaus": lambda n: 50 + 100 * (n // 10),
    "one step": lambda n: 10 if n < 700 else 10_000,
}


@pytest.mark.parametrize("name", sorted(GROWTHS))
@pytest.mark.parametrize("target", [64, 1000, 4096])
@pytest.mark.parametrize("hi", [1, 8, 256, 5000])
def test_matches_a_linear_scan(name: str, target: int, hi: int) -> None:
    f = GROWTHS[name]
    tok = CountingTokenizer(f)
    if f(0) > target:
        with pytest.raises(ValueError):
            fit_to_length(build, target, tok, hi)
        return
    assert fit_to_length(build, target, tok, hi) == brute_force(f, target)
    assert tok.calls <= 40


def test_near_affine_growth_takes_a_handful_of_counts() -> None:
    tok = CountingTokenizer(GROWTHS["affine with jitter"])
    assert fit_to_length(build, 4096, tok, hi=256) == brute_force(tok.f, 4096)
    assert tok.calls <= 5  # bisection over [0, 256] would count 10


def test_a_prompt_already_too_long_is_refused() -> None:
    with pytest.raises(ValueError, match="already longer than 64 tokens"):
        fit_to_length(build, 64, CountingTokenizer(lambda n: 65 + n), hi=8)


def test_a_prompt_that_never_grows_is_refused() -> None:
    with pytest.raises(ValueError, match="does not reach 4096 tokens"):
        fit_to_length(build, 4096, CountingTokenizer(lambda n: 100), hi=8)
