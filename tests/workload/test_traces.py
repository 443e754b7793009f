"""Trace import: [[trace]] entries over JSONL and Parquet chat requests."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from kvgate.errors import BadInput
from kvgate.workload.case import CaseDraft
from kvgate.workload.freeze import freeze_cases
from kvgate.workload.hf_tokenizer import HFPromptTokenizer
from kvgate.workload.prefix_groups import assign_prefix_groups
from kvgate.workload.suites import parse_suite
from kvgate.workload.tokenizer import WordTokenizer
from kvgate.workload.traces import turns_bucket

TOK = WordTokenizer()
SYSTEM = "You are the support assistant of Example Corp. " + " ".join(
    f"Policy {i} applies." for i in range(60)
)
TOOLS = [{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]


def records() -> list[dict[str, Any]]:
    return [
        {
            "id": "r1",
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": "Where is my order?"},
            ],
            "expected": ["order"],
            "validator": "substring_any",
            "model": "ignored",
            "temperature": 0.7,
        },
        {
            "id": "r2",
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello! How can I help?"},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "Cancel order "}, {"type": "text", "text": "7"}],
                },
            ],
            "expected": "cancelled",
            "max_tokens": 40,
            "slices": {"tenant": "acme"},
        },
        {
            "id": "r3",
            "messages": [{"role": "user", "content": "Look up order ORD-1."}],
            "tools": TOOLS,
            "expected": {"name": "lookup_order", "arguments": {"order_id": "ORD-1"}},
            "validator": "tool_call",
            "critical": True,
        },
    ]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def suite(tmp_path: Path, trace: Path, extra: str = 'validator = "exact"') -> Path:
    spec = tmp_path / "t.toml"
    spec.write_text(f'name = "traces"\n\n[[trace]]\npath = "{trace}"\n{extra}\n')
    return spec


def freeze(spec: Path, tok: Any = TOK) -> list[Any]:
    return freeze_cases([parse_suite(spec)], tok, seed=0)


def test_jsonl_trace(tmp_path: Path) -> None:
    spec = suite(
        tmp_path, write_jsonl(tmp_path / "t.jsonl", records()), 'validator = "exact"\nmax_new_tokens = 99'
    )
    first, second, third = freeze(spec)
    assert first.validator == "substring_any" and first.expected == ["order"] and first.max_new_tokens == 99
    assert second.validator == "exact" and second.max_new_tokens == 40
    assert second.messages[-1] == {"role": "user", "content": "Cancel order 7"}
    assert second.slices == {"tenant": "acme", "ctx_bucket": "512", "turns": "2"}
    assert first.slices["turns"] == "1" and first.task == "trace"
    # a long shared system prompt: one prefix group; the tool request starts differently
    assert first.prefix_group is not None and first.prefix_group == second.prefix_group
    assert third.prefix_group is None
    # tools are described in a system message the trace did not have
    assert third.messages[0]["role"] == "system" and '"lookup_order"' in third.messages[0]["content"]
    assert third.critical and not first.critical
    assert all(c.question_start is not None for c in (first, second, third))
    assert freeze(spec) == [first, second, third]


def test_parquet_trace(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [
        {
            "messages": [{"role": "user", "content": "Say yes."}],
            "expected_json": json.dumps(["yes"]),
            "validator": "substring_all",
            "tools": None,
        },
        {
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Call it."}],
            "expected_json": json.dumps({"name": "lookup_order", "arguments": {"order_id": "A"}}),
            "validator": "tool_call",
            "tools": json.dumps(TOOLS),
        },
    ]
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    first, second = freeze(suite(tmp_path, path))
    assert first.expected == ["yes"] and first.messages == ({"role": "user", "content": "Say yes."},)
    assert second.expected["arguments"] == {"order_id": "A"}
    assert second.messages[0]["content"].startswith("Be brief.\n\nYou can call the following tools:")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"messages": [', r"t\.jsonl:3: not valid JSON"),
        ("[1, 2]", r"t\.jsonl:3: a record must be a JSON object"),
        ('{"expected": "x"}', r"t\.jsonl:3: missing key 'messages'"),
        ('{"messages": [{"role": "user", "content": "q"}]}', r"t\.jsonl:3: no 'expected' answer"),
        ('{"messages": [{"role": "robot", "content": "q"}], "expected": "x"}', r"t\.jsonl:3: message 0"),
        (
            '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], '
            '"expected": "x"}',
            r"t\.jsonl:3: the last message",
        ),
        (
            '{"messages": [{"role": "user", "content": "q"}], "expected": "x", "max_tokens": 0}',
            r"t\.jsonl:3: max_tokens",
        ),
        (
            '{"messages": [{"role": "user", "content": "doc q"}], "expected": "x", "question": "zz"}',
            r"t\.jsonl:3: question must be non-empty text found inside the last user message",
        ),
        (
            '{"messages": [{"role": "user", "content": "doc q"}], "expected": "x", "question_offset": 5}',
            r"t\.jsonl:3: question_offset must be an integer in \[0, 5\)",
        ),
        (
            '{"messages": [{"role": "user", "content": "doc q"}], "expected": "x", "question": "q", '
            '"question_offset": 4}',
            r"t\.jsonl:3: give question or question_offset, not both",
        ),
    ],
)
def test_a_bad_record_names_its_line(tmp_path: Path, line: str, message: str) -> None:
    good = {"messages": [{"role": "user", "content": "q"}], "expected": "x"}
    trace = write_jsonl(tmp_path / "t.jsonl", [good, "", line])  # line 2 is blank and skipped
    with pytest.raises(BadInput, match=message):
        freeze(suite(tmp_path, trace))


def test_unlabelled_records_can_be_skipped(tmp_path: Path) -> None:
    rows = [
        {"messages": [{"role": "user", "content": "q"}]},
        {"messages": [{"role": "user", "content": "r"}], "expected": "x"},
    ]
    trace = write_jsonl(tmp_path / "t.jsonl", rows)
    (case,) = freeze(suite(tmp_path, trace, 'validator = "exact"\nskip_unlabelled = true'))
    assert case.expected == "x"


def test_a_record_needs_a_validator_from_somewhere(tmp_path: Path) -> None:
    trace = write_jsonl(
        tmp_path / "t.jsonl", [{"messages": [{"role": "user", "content": "q"}], "expected": "x"}]
    )
    with pytest.raises(BadInput, match=r"t\.jsonl:1: no 'validator'"):
        freeze(suite(tmp_path, trace, ""))


def test_limit_and_missing_file(tmp_path: Path) -> None:
    trace = write_jsonl(tmp_path / "t.jsonl", records())
    assert len(freeze(suite(tmp_path, trace, 'validator = "exact"\nlimit = 2'))) == 2
    with pytest.raises(BadInput, match="does not exist"):
        freeze(suite(tmp_path, tmp_path / "absent.jsonl"))
    with pytest.raises(BadInput, match=r"\.jsonl, \.json, \.ndjson or \.parquet"):
        parse_suite(suite(tmp_path, tmp_path / "t.csv"))


def test_a_relative_path_is_read_beside_the_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "suites"
    (folder / "data").mkdir(parents=True)
    write_jsonl(folder / "data" / "t.jsonl", records())
    spec = folder / "t.toml"
    spec.write_text('name = "traces"\n\n[[trace]]\npath = "data/t.jsonl"\nvalidator = "exact"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(folder)
    from_its_folder = freeze(spec)  # where the path used to be read from: the ids must not change
    monkeypatch.chdir(tmp_path)
    suite = parse_suite(Path("suites/t.toml"))  # a relative suite path, then another working directory
    monkeypatch.chdir(elsewhere)
    assert freeze_cases([suite], TOK, seed=0) == from_its_folder
    moved = shutil.copytree(folder, tmp_path / "moved")  # ids hash the path as written, not as resolved
    assert freeze(moved / "t.toml") == from_its_folder
    assert len(from_its_folder) == 3
    spec.write_text(spec.read_text().replace("data/t.jsonl", "data/absent.jsonl"))
    with pytest.raises(
        BadInput, match=f"^trace {re.escape(str(folder / 'data' / 'absent.jsonl'))} does not exist$"
    ):
        freeze(spec)


def test_turn_buckets() -> None:
    assert [turns_bucket(n) for n in (1, 2, 3, 4, 5, 8, 9, 40)] == [
        "1",
        "2",
        "3-4",
        "3-4",
        "5-8",
        "5-8",
        "9+",
        "9+",
    ]


def test_prefix_groups_with_the_real_tokenizer(smollm_tokenizer: HFPromptTokenizer) -> None:
    def draft(system: str, user: str) -> CaseDraft:
        return CaseDraft(
            task="t",
            messages=({"role": "system", "content": system}, {"role": "user", "content": user}),
            validator="exact",
            expected="x",
            max_new_tokens=4,
        )

    drafts = [
        draft(SYSTEM, "first"),
        draft(SYSTEM, "second"),
        draft("Short system.", "third"),
        draft(SYSTEM[:80], "x"),
    ]
    grouped = assign_prefix_groups(drafts, smollm_tokenizer, 64, "t", min_share=0.5)
    assert grouped[0].prefix_group == grouped[1].prefix_group is not None
    assert grouped[2].prefix_group is None and grouped[3].prefix_group is None
    # the group needs min_tokens of shared prefix: with a threshold beyond the prompts, none
    assert all(
        d.prefix_group is None
        for d in assign_prefix_groups(drafts, smollm_tokenizer, 10_000, "t", min_share=0)
    )


def test_the_question_inside_a_single_message_request(tmp_path: Path) -> None:
    """A request that puts context and question in one message marks where the question begins, so
    `scope = "context"` keeps the question out of eviction."""
    document = " ".join(f"Fact {i} is true." for i in range(40))
    content = f"{document}\nQuestion: which fact is first?"
    base = {"messages": [{"role": "user", "content": content}], "expected": "Fact 0"}
    rows = [
        {**base, "id": "text", "question": "Question: which fact is first?"},
        {**base, "id": "offset", "question_offset": len(document) + 1},
        {**base, "id": "whole"},
    ]
    frozen = freeze(suite(tmp_path, write_jsonl(tmp_path / "t.jsonl", rows)))
    cases = dict(zip(("text", "offset", "whole"), frozen, strict=True))
    assert cases["text"].question_start == cases["offset"].question_start
    assert 40 * 4 < cases["text"].question_start < cases["text"].n_prompt_tokens - 5
    assert cases["whole"].question_start < 10  # the whole message: nothing of it is context
