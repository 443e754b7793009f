"""Prompt sizing with the embedded model's real tokenizer and chat template (SmolLM2, GGUF)."""

from __future__ import annotations

import random

import pytest
from real_tokenizer_params import CASES

from kvgate.workload.generators.base import GENERATORS
from kvgate.workload.hf_tokenizer import HFPromptTokenizer


@pytest.mark.parametrize("name", sorted(CASES))
def test_prompt_length_within_2_percent_of_target(name: str, smollm_tokenizer: HFPromptTokenizer) -> None:
    generator = GENERATORS.get(name)
    params = generator.params_type(**CASES[name])
    for draft in generator.generate(params, random.Random(3), smollm_tokenizer):
        target = draft.params["length"]
        n = smollm_tokenizer.count_chat(draft.messages)
        assert 0.98 * target <= n <= target, (name, target, n)
        start = smollm_tokenizer.question_start(draft.messages, draft.question)
        assert start is not None and 0.8 * n < start < n
        text = smollm_tokenizer.render(draft.messages)
        if draft.validator == "substring_all":
            assert all(answer in text for answer in draft.expected)


def test_same_seed_same_prompts_with_the_real_tokenizer(smollm_tokenizer: HFPromptTokenizer) -> None:
    generator = GENERATORS.get("needle")
    params = generator.params_type(lengths=(1024,), depths=(0.5,), variant="multivalue")
    first = generator.generate(params, random.Random(5), smollm_tokenizer)
    assert first == generator.generate(params, random.Random(5), smollm_tokenizer)
    assert first != generator.generate(params, random.Random(6), smollm_tokenizer)
