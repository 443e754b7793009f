"""The grid, draft and prompt helpers the synthetic generators share."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kvgate.workload.generators.base import Messages
from kvgate.workload.generators.cells import Cell, DepthCell, cells, depth_cells, draft
from kvgate.workload.generators.prompts import haystack_prompt, user_prompt
from kvgate.workload.tokenizer import WordTokenizer

TOK = WordTokenizer()


@dataclass(frozen=True)
class Budget:
    max_new_tokens: int = 32
    critical: bool = True


def test_cells_walk_lengths_then_depths_then_index() -> None:
    assert cells([512, 1024], 2) == [Cell(512, 0), Cell(512, 1), Cell(1024, 0), Cell(1024, 1)]
    walked = [(c.length, c.depth, c.index) for c in depth_cells([512, 2048], [0.9, 0.1], 2)]
    assert walked == [
        (512, 0.9, 0),
        (512, 0.9, 1),
        (512, 0.1, 0),
        (512, 0.1, 1),
        (2048, 0.9, 0),
        (2048, 0.9, 1),
        (2048, 0.1, 0),
        (2048, 0.1, 1),
    ]


def test_a_cell_labels_its_slices_and_leads_its_params() -> None:
    assert Cell(1024, 3).slices == {"ctx_bucket": "1k"}
    assert DepthCell(600, 0, 0.9).slices == {"ctx_bucket": "600", "depth_bucket": "end"}
    assert list(Cell(512, 1).params(haystack="essay")) == ["length", "index", "haystack"]
    assert DepthCell(512, 1, 0.5).params(pairs=7) == {"length": 512, "depth": 0.5, "index": 1, "pairs": 7}
    assert list(DepthCell(512, 1, 0.5).params(pairs=7)) == ["length", "depth", "index", "pairs"]


def test_draft_fills_the_cell_and_the_budget() -> None:
    messages = user_prompt("Intro.", "Context.", "Question?")
    case = draft(
        DepthCell(2048, 1, 0.1),
        Budget(),
        task="t",
        messages=messages,
        validator="substring_all",
        expected=["x"],
        question="Question?",
        haystack="noise",
    )
    assert (case.task, case.messages, case.expected) == ("t", messages, ["x"])
    assert case.validator == "substring_all"
    assert (case.max_new_tokens, case.critical, case.question) == (32, True, "Question?")
    assert case.slices == {"ctx_bucket": "2k", "depth_bucket": "start"}
    assert case.params == {"length": 2048, "depth": 0.1, "index": 1, "haystack": "noise"}


def test_user_prompt_separates_intro_context_and_question_by_blank_lines() -> None:
    assert user_prompt("A.", "B b.", "C?") == ({"role": "user", "content": "A.\n\nB b.\n\nC?"},)


def frame(context: str) -> Messages:
    return ({"role": "system", "content": "Sys."}, *user_prompt("Read.", context, "Which colour?"))


@pytest.mark.parametrize("haystack", ["noise", "essay"])
def test_haystack_prompt_is_the_longest_that_fits_and_holds_every_needle(haystack: str) -> None:
    needles = [(0.2, "The door is teal."), (0.8, "The roof is ochre.")]
    messages = haystack_prompt(frame, haystack, needles, 0.25, 300, TOK)
    assert messages[0] == {"role": "system", "content": "Sys."}
    text = messages[1]["content"]
    assert text.startswith("Read.\n\n") and text.endswith("\n\nWhich colour?")
    assert text.index("The door is teal.") < text.index("The roof is ochre.")
    assert 300 - 2 <= TOK.count_chat(messages) <= 300  # one more word would pass the target
    assert messages == haystack_prompt(frame, haystack, needles, 0.25, 300, TOK)


def test_haystack_prompt_refuses_a_length_its_frame_already_exceeds() -> None:
    with pytest.raises(ValueError, match="already longer"):
        haystack_prompt(frame, "noise", [(0.5, "The door is teal.")], 0.0, 10, TOK)
