"""The "shared" needle variant: one context per cell, one case per key, one prefix group — the workload
that prefix and span reuse arms are judged on."""

from __future__ import annotations

import random

from kvgate.validators.registry import get_validator
from kvgate.workload.case import CaseDraft
from kvgate.workload.freeze import freeze_cases
from kvgate.workload.generators.base import GENERATORS
from kvgate.workload.hf_tokenizer import HFPromptTokenizer
from kvgate.workload.suites import resolve_suite
from kvgate.workload.tokenizer import PromptTokenizer, WordTokenizer


def shared(tok: PromptTokenizer, **overrides: object) -> list[CaseDraft]:
    generator = GENERATORS.get("needle")
    params = {"lengths": (1024,), "depths": (0.1, 0.6), "variant": "shared", "num_needles": 3, **overrides}
    return generator.generate(generator.params_type(**params), random.Random(4), tok)


def context(draft: CaseDraft) -> str:
    content = draft.messages[-1]["content"]
    assert draft.question is not None and content.endswith(draft.question)
    return content[: -len(draft.question)]


def test_each_cell_gives_one_case_per_key_over_one_context() -> None:
    drafts = shared(WordTokenizer())
    assert len(drafts) == 2 * 3
    cells = [drafts[:3], drafts[3:]]
    for cell in cells:
        assert len({context(d) for d in cell}) == 1
        assert len({d.question for d in cell}) == 3
        assert len({d.prefix_group for d in cell}) == 1 and cell[0].prefix_group is not None
        assert [d.params["query"] for d in cell] == [0, 1, 2]
    assert cells[0][0].prefix_group != cells[1][0].prefix_group
    # each case's depth is its own needle's: spread evenly from the cell's depth, wrapping past the end
    assert [d.params["depth"] for d in cells[1]] == [0.6, 0.933333, 0.266667]
    assert [d.slices["depth_bucket"] for d in cells[1]] == ["middle", "end", "middle"]


def test_every_answer_is_in_the_context_and_only_its_own_key_is_asked() -> None:
    validator = get_validator("substring_all")
    for draft in shared(WordTokenizer()):
        (value,) = draft.expected
        assert value in context(draft)
        assert validator(value, draft.expected, {}).passed
        others = [d.expected[0] for d in shared(WordTokenizer()) if d.expected != draft.expected]
        assert not any(validator(v, draft.expected, {}).passed for v in others)


def test_prompts_fit_the_target_and_share_every_token_before_the_question(
    smollm_tokenizer: HFPromptTokenizer,
) -> None:
    drafts = shared(smollm_tokenizer, depths=(0.3,), num_needles=4)
    ids = [smollm_tokenizer.encode_chat(d.messages) for d in drafts]
    assert all(0.98 * 1024 <= len(i) <= 1024 for i in ids), [len(i) for i in ids]
    starts = {smollm_tokenizer.question_start(d.messages, d.question or "") for d in drafts}
    (start,) = starts  # the same context, so the question starts at the same token
    assert start is not None and all(i[:start] == ids[0][:start] for i in ids)


def test_the_reuse_suite_freezes_with_prefix_groups() -> None:
    cases = freeze_cases([resolve_suite("reuse")], WordTokenizer(), seed=0)
    groups = [c.prefix_group for c in cases]
    assert None not in groups and len(set(groups)) * 4 == len(cases)
    assert len({c.case_id for c in cases}) == len(cases)
