"""Code generation: write a small Python function whose constant K is given in long project notes.

Each case picks a function template (`TEMPLATES`), a constant K in [2, 9] and a few test inputs. The
sentence "Implementation note: in the function f, the constant K is 7." sits at the cell's depth in a
haystack sized to the target length; the request at the end asks for the function. ``expected`` is a
block of ``assert`` lines computed from the reference solution, judged by ``python_tests`` (which runs
the model's code in a sandbox). The inputs are redrawn until the reference with K - 1 or K + 1 would fail
them, so a wrong constant is always caught.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.base import GeneratorParams
from kvgate.workload.generators.cells import DepthCell, depth_cells, draft
from kvgate.workload.generators.common import check_choice, check_depths, check_lengths, check_positive
from kvgate.workload.generators.haystacks import HAYSTACKS
from kvgate.workload.generators.prompts import haystack_prompt, user_prompt
from kvgate.workload.tokenizer import PromptTokenizer


def _ints(lo: int, hi: int) -> Callable[[random.Random], Any]:
    return lambda rng: [rng.randrange(lo, hi + 1) for _ in range(rng.randrange(0, 13))]


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase + "  ,!") for _ in range(rng.randrange(0, 14)))


@dataclass(frozen=True)
class Template:
    function: str
    signature: str
    description: str
    reference: str
    """Source of a correct solution, with ``{k}`` for the constant."""
    draw: Callable[[random.Random], Any]
    """One test input (the function's single argument)."""


TEMPLATES: dict[str, Template] = {
    t.function: t
    for t in (
        Template(
            "count_multiples",
            "count_multiples(xs: list[int]) -> int",
            "returns how many elements of xs are divisible by K",
            "def count_multiples(xs):\n    return sum(1 for x in xs if x % {k} == 0)\n",
            _ints(-60, 60),
        ),
        Template(
            "rotate_left",
            "rotate_left(s: str) -> str",
            "returns s rotated left by K characters, wrapping around (K is taken modulo len(s), and the "
            "empty string stays empty)",
            "def rotate_left(s):\n    if not s:\n        return s\n"
            "    k = {k} % len(s)\n    return s[k:] + s[:k]\n",
            _text,
        ),
        Template(
            "clip_sum",
            "clip_sum(xs: list[int]) -> int",
            "returns the sum of the elements of xs after replacing every element greater than K by K",
            "def clip_sum(xs):\n    return sum(min(x, {k}) for x in xs)\n",
            _ints(-20, 30),
        ),
        Template(
            "every_kth",
            "every_kth(xs: list[int]) -> list[int]",
            "returns every K-th element of xs starting with the first one, that is xs[0], xs[K], xs[2*K] "
            "and so on",
            "def every_kth(xs):\n    return xs[::{k}]\n",
            _ints(0, 99),
        ),
        Template(
            "caesar",
            "caesar(s: str) -> str",
            "shifts every lowercase letter a-z forward by K places in the alphabet, wrapping from z back to "
            "a, and leaves all other characters unchanged",
            'def caesar(s):\n    return "".join(chr((ord(c) - 97 + {k}) % 26 + 97) if "a" <= c <= "z" else c '
            "for c in s)\n",
            _text,
        ),
    )
}


def reference_function(template: Template, k: int) -> Callable[[Any], Any]:
    namespace: dict[str, Any] = {}
    exec(template.reference.format(k=k), namespace)  # our own constant source, not model output
    function: Callable[[Any], Any] = namespace[template.function]
    return function


def unit_tests(template: Template, k: int, rng: random.Random, n: int) -> str:
    """`n` assert lines that the reference with `k` passes and the references with k ± 1 fail."""
    right = reference_function(template, k)
    wrong = [reference_function(template, k - 1), reference_function(template, k + 1)]
    for _ in range(100):
        inputs = [template.draw(rng) for _ in range(n)]
        if all(any(w(x) != right(x) for x in inputs) for w in wrong):
            return "".join(f"assert {template.function}({x!r}) == {right(x)!r}\n" for x in inputs)
    raise ValueError(f"no discriminating tests for {template.function} with K = {k}")


@dataclass(frozen=True, kw_only=True)
class CodeParams(GeneratorParams):
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    num_tests: int = 6
    haystack: str = "essay"
    max_new_tokens: int = 256

    def __post_init__(self) -> None:
        check_lengths(self.lengths, minimum=256)
        check_depths(self.depths)
        check_choice("haystack", self.haystack, HAYSTACKS)
        check_positive(per_cell=self.per_cell, num_tests=self.num_tests, max_new_tokens=self.max_new_tokens)


INTRO = "Here are the notes of our software project."


@dataclass(frozen=True)
class CodeGenerator:
    name: str
    version: str = "1"
    params_type: type = CodeParams

    def generate(self, params: CodeParams, rng: random.Random, tok: PromptTokenizer) -> list[CaseDraft]:
        cells = depth_cells(params.lengths, params.depths, params.per_cell)
        return [self._case(params, cell, rng, tok) for cell in cells]

    def _case(self, p: CodeParams, cell: DepthCell, rng: random.Random, tok: PromptTokenizer) -> CaseDraft:
        template = TEMPLATES[rng.choice(sorted(TEMPLATES))]
        k = rng.randrange(2, 10)
        tests = unit_tests(template, k, rng, p.num_tests)
        note = f"Implementation note: in the function {template.function}, the constant K is {k}."
        request = (
            f"Write a Python function `{template.signature}` that {template.description}, where K is the "
            "constant given in the implementation note above. Reply with the complete function in a "
            "```python code block."
        )
        seed = rng.random()
        messages = haystack_prompt(
            lambda context: user_prompt(INTRO, context, request),
            p.haystack,
            [(cell.depth, note)],
            seed,
            cell.length,
            tok,
        )
        return draft(
            cell,
            p,
            task="code",
            messages=messages,
            validator="python_tests",
            expected=tests,
            question=request,
            haystack=p.haystack,
        )
