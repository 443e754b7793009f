"""Synthetic generators through the public seam: GENERATORS, their params types and the validators."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from typing import Any

import pytest

from kvgate.validators.registry import get_validator
from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.base import GENERATORS, ctx_bucket
from kvgate.workload.generators.code import TEMPLATES
from kvgate.workload.tokenizer import WordTokenizer

TOK = WordTokenizer()

SMALL: dict[str, dict[str, Any]] = {
    "needle": {"lengths": (512,), "depths": (0.0, 0.5, 1.0)},
    "variable_tracking": {"lengths": (512,), "num_chains": 2, "num_hops": 3, "per_cell": 2},
    "common_words": {"lengths": (768,), "per_cell": 2},
    "freq_words": {"lengths": (512,), "per_cell": 2},
    "kv_retrieval": {"lengths": (512,), "depths": (0.0, 0.5, 1.0)},
    "structured_output": {"lengths": (512,), "depths": (0.2, 0.8)},
    "tool_call": {"lengths": (768,), "depths": (0.5,), "per_cell": 4},
    "code": {"lengths": (512,), "depths": (0.5,), "per_cell": 3},
    "block_edges": {"block_sizes": (16, 128), "multiples": (8, 4)},
}
NAMES = sorted(SMALL)


def drafts(name: str, seed: int = 1, **overrides: Any) -> list[CaseDraft]:
    generator = GENERATORS.get(name)
    params = generator.params_type(**{**SMALL[name], **overrides})
    return generator.generate(params, random.Random(seed), TOK)


def prompt(draft: CaseDraft) -> str:
    return "\n".join(m["content"] for m in draft.messages)


def reference_output(draft: CaseDraft) -> str:
    """What a perfect model would answer."""
    if draft.validator == "substring_all":
        return ", ".join(draft.expected)
    if draft.validator == "json_schema":
        return json.dumps({k: v["const"] for k, v in draft.expected["properties"].items()})
    if draft.validator == "tool_call":
        return f"<tool_call>{json.dumps(draft.expected)}</tool_call>"
    if draft.validator == "python_tests":
        function, k = re.search(r"in the function (\w+), the constant K is (\d+)\.", prompt(draft)).groups()
        return f"```python\n{TEMPLATES[function].reference.format(k=int(k))}```"
    raise AssertionError(draft.validator)


def answer_strings(draft: CaseDraft) -> list[str]:
    """The strings the validator needs, each of which the prompt must contain verbatim."""
    if draft.validator == "substring_all":
        return list(draft.expected)
    if draft.validator == "json_schema":
        return [str(v["const"]) for v in draft.expected["properties"].values()]
    if draft.validator == "tool_call":
        return [str(v) for v in draft.expected["arguments"].values()]
    if draft.validator == "python_tests":
        return []
    raise AssertionError(draft.validator)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_drafts_other_seed_other_drafts(name: str) -> None:
    assert drafts(name, seed=7) == drafts(name, seed=7)
    assert [d.messages for d in drafts(name, seed=7)] != [d.messages for d in drafts(name, seed=8)]


@pytest.mark.parametrize("name", NAMES)
def test_drafts_are_well_formed(name: str) -> None:
    generator = GENERATORS.get(name)
    for draft in drafts(name):
        target = draft.params["length"]
        assert TOK.count_chat(draft.messages) <= target
        assert draft.messages[-1]["role"] == "user"
        assert draft.question and draft.messages[-1]["content"].endswith(draft.question)
        assert TOK.question_start(draft.messages, draft.question) is not None
        bucket = draft.params.get("block_length", target)  # a block edge's bucket is its block multiple's
        assert draft.task and draft.slices["ctx_bucket"] == ctx_bucket(bucket)
        assert not draft.critical
        json.dumps([draft.expected, draft.validator_args, draft.params])  # JSON-able, as the row stores them
        get_validator(draft.validator).check_args(draft.expected, draft.validator_args)
    assert generator.name == name and generator.version


@pytest.mark.parametrize("name", NAMES)
def test_the_answer_is_in_the_prompt_and_the_reference_answer_passes(name: str) -> None:
    for draft in drafts(name):
        text = prompt(draft)
        for needed in answer_strings(draft):
            assert needed in text
        validator = get_validator(draft.validator)
        verdict = validator(reference_output(draft), draft.expected, draft.validator_args)
        assert verdict.passed, verdict
        wrong = validator("I could not find it.", draft.expected, draft.validator_args)
        assert not wrong.passed and wrong.fail_kind in ("mismatch", "invalid")


@pytest.mark.parametrize("name", NAMES)
def test_critical_flag_is_carried(name: str) -> None:
    assert all(d.critical for d in drafts(name, critical=True))


def test_block_edge_prompts_are_one_token_below_at_and_above_each_block_multiple() -> None:
    lengths = [
        (d.slices["block_edge"], TOK.count_chat(d.messages), d.params["block_length"])
        for d in drafts("block_edges")
    ]
    offsets = {"below": -1, "at": 0, "above": 1}
    assert sorted({aligned for _, _, aligned in lengths}) == [64, 128, 512, 1024]  # 16·4, 16·8, 128·4, 128·8
    assert all(n == aligned + offsets[edge] for edge, n, aligned in lengths)
    assert sorted(edge for edge, _, _ in lengths) == sorted(["below", "at", "above"] * 4)
    with pytest.raises(ValueError, match="haystack"):  # 16 tokens cannot hold the question
        drafts("block_edges", block_sizes=(16,), multiples=(1,))


def test_prompts_reach_their_target_within_a_few_words() -> None:
    for name in ("needle", "variable_tracking", "tool_call", "code"):
        for draft in drafts(name):
            assert TOK.count_chat(draft.messages) >= 0.98 * draft.params["length"], name


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("needle", {"lengths": ()}),
        ("needle", {"depths": (1.5,)}),
        ("needle", {"variant": "multi"}),
        ("needle", {"value_type": "date"}),
        ("needle", {"num_needles": 3}),  # single takes none
        ("needle", {"variant": "multikey", "num_needles": 1}),
        ("needle", {"haystack": "poetry"}),
        ("variable_tracking", {"num_hops": 0}),
        ("common_words", {"freq_common": 2, "freq_uncommon": 3}),
        ("freq_words", {"alpha": 1.0}),
        ("kv_retrieval", {"lengths": (100,)}),
        ("structured_output", {"per_cell": 0}),
        ("tool_call", {"depths": ()}),
        ("code", {"num_tests": 0}),
        ("block_edges", {"block_sizes": (1,)}),
        ("block_edges", {"multiples": ()}),
    ],
)
def test_bad_parameters_are_refused(name: str, bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        GENERATORS.get(name).params_type(**{**SMALL[name], **bad})


# --- needle ---------------------------------------------------------------------------------------------

NEEDLE = re.compile(r"One of the special magic (\w+) for (\S+) is: (\S+)\.")


@pytest.mark.parametrize("value_type", ["number", "word", "uuid"])
@pytest.mark.parametrize("haystack", ["noise", "essay"])
def test_needle_single_value_types(value_type: str, haystack: str) -> None:
    for draft in drafts("needle", value_type=value_type, haystack=haystack):
        (noun, key, value), *rest = NEEDLE.findall(prompt(draft))
        assert not rest and draft.expected == [value] and key in draft.question
        assert noun == {"number": "numbers", "word": "words", "uuid": "uuids"}[value_type]
        if value_type == "number":
            assert re.fullmatch(r"\d{7}", value)
        elif value_type == "uuid":
            assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", value)
        else:
            assert re.fullmatch(r"[a-z]+-[a-z]+", value)


def test_needle_depth_places_the_answer() -> None:
    for draft in drafts("needle", haystack="noise"):
        text = draft.messages[-1]["content"]
        at = text.index("One of the special magic") / len(text)
        assert abs(at - draft.params["depth"]) < 0.1
        assert (
            draft.slices["depth_bucket"] == {0.0: "start", 0.5: "middle", 1.0: "end"}[draft.params["depth"]]
        )


def test_needle_multikey_has_distractors_and_one_answer() -> None:
    for draft in drafts("needle", variant="multikey", num_needles=5):
        found = NEEDLE.findall(prompt(draft))
        assert len(found) == 5 and len({k for _, k, _ in found}) == 5
        asked = [(k, v) for _, k, v in found if k in draft.question]
        assert len(asked) == 1 and draft.expected == [asked[0][1]]
        assert draft.task == "niah_multikey"


def test_needle_multivalue_asks_for_every_value_of_one_key() -> None:
    for draft in drafts("needle", variant="multivalue"):
        found = NEEDLE.findall(prompt(draft))
        assert len(found) == 4 and len({k for _, k, _ in found}) == 1
        assert sorted(draft.expected) == sorted(v for _, _, v in found)


def test_needle_multiquery_asks_every_key() -> None:
    for draft in drafts("needle", variant="multiquery", num_needles=3, key_type="uuid"):
        found = NEEDLE.findall(prompt(draft))
        assert len(found) == 3 and all(k in draft.question for _, k, _ in found)
        assert sorted(draft.expected) == sorted(v for _, _, v in found)


def test_partial_answers_fail_multi_needle_tasks() -> None:
    validator = get_validator("substring_all")
    for draft in drafts("needle", variant="multivalue"):
        assert not validator(", ".join(draft.expected[:-1]), draft.expected, {}).passed


# --- variable tracking ----------------------------------------------------------------------------------


def test_variable_tracking_answer_is_every_variable_holding_the_value() -> None:
    for draft in drafts("variable_tracking"):
        text = prompt(draft)
        value = re.search(r"assigned the value (\d+)", draft.question).group(1)
        holds: dict[str, str] = {}
        for name, rhs in re.findall(r"VAR (\w+) = ((?:VAR )?\w+)\.", text):
            holds[name] = holds[rhs[4:]] if rhs.startswith("VAR ") else rhs
        assert len(holds) == 2 * 4
        assert sorted(draft.expected) == sorted(n for n, v in holds.items() if v == value)


# --- aggregation ----------------------------------------------------------------------------------------


def test_common_words_answer_is_the_most_frequent_words() -> None:
    for draft in drafts("common_words"):
        listed = re.findall(r"\d+\. (\w+)", draft.messages[-1]["content"])
        counts = Counter(listed)
        top = {w for w, _ in counts.most_common(10)}
        assert top == set(draft.expected)
        assert min(counts[w] for w in top) > max(c for w, c in counts.items() if w not in top)
        assert draft.params["freq_common"] > draft.params["freq_uncommon"]


def test_common_words_too_short_for_the_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="uncommon words"):
        drafts("common_words", lengths=(60000,), per_cell=1)


def test_freq_words_answer_is_the_top_k() -> None:
    for draft in drafts("freq_words", top_k=3):
        body = draft.messages[-1]["content"].split("\n\n")[1]
        ranked = Counter(body.split()).most_common()
        assert [w for w, _ in ranked[:3]] == draft.expected
        assert ranked[2][1] > ranked[3][1]


# --- key-value retrieval ----------------------------------------------------------------------------------


def test_kv_retrieval_key_sits_at_the_depth() -> None:
    for draft in drafts("kv_retrieval"):
        content = draft.messages[-1]["content"]
        data = json.loads(content[content.index("{") : content.rindex("}") + 1])
        keys = list(data)
        key = re.search(r'the key "([^"]+)"', draft.question).group(1)
        assert data[key] == draft.expected[0]
        assert keys.index(key) == round(draft.params["depth"] * (len(keys) - 1))
        assert len(keys) == draft.params["pairs"] > 3


# --- structured output, tool call, code ------------------------------------------------------------------


def test_structured_output_rejects_the_wrong_record_and_wrong_types() -> None:
    validator = get_validator("json_schema")
    for draft in drafts("structured_output"):
        good = json.loads(reference_output(draft))
        assert f"Record {good['id']}: {good['name']}, aged {good['age']}" in prompt(draft)
        assert (
            validator(json.dumps({**good, "age": good["age"] + 1}), draft.expected, {}).fail_kind
            == "mismatch"
        )
        assert (
            validator(json.dumps({**good, "age": str(good["age"])}), draft.expected, {}).fail_kind
            == "mismatch"
        )
        assert validator("{not json", draft.expected, {}).fail_kind == "invalid"


def test_tool_call_system_prompt_describes_the_tools() -> None:
    for draft in drafts("tool_call"):
        system, user = draft.messages
        assert system["role"] == "system" and draft.expected["name"] in system["content"]
        assert '"name": <tool name>' in system["content"]
        assert user["role"] == "user"
    names = {d.expected["name"] for d in drafts("tool_call", per_cell=12)}
    assert len(names) >= 3


def test_code_wrong_constant_fails_its_tests() -> None:
    validator = get_validator("python_tests")
    for draft in drafts("code"):
        function, k = re.search(r"in the function (\w+), the constant K is (\d+)\.", prompt(draft)).groups()
        wrong = f"```python\n{TEMPLATES[function].reference.format(k=int(k) + 1)}```"
        verdict = validator(wrong, draft.expected, draft.validator_args)
        assert verdict.fail_kind == "mismatch", verdict
        assert draft.expected.count("assert ") == 6


def test_every_generator_of_the_table_has_its_name() -> None:
    assert all(GENERATORS.get(name).name == name for name in GENERATORS.names())
