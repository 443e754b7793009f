"""Prefix groups need `prefix_min_share` of their prompts: a short shared system prompt makes no cluster,
a shared document does, and a group under the share is refined into the documents inside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvgate.errors import BadInput
from kvgate.workload.case import CaseDraft
from kvgate.workload.freeze import freeze_cases
from kvgate.workload.prefix_groups import SHARED_PREFIX, assign_prefix_groups, shared_share
from kvgate.workload.suites import parse_suite
from kvgate.workload.tokenizer import WordTokenizer

TOK = WordTokenizer()
SYSTEM = " ".join(f"Rule {i} applies." for i in range(40))  # 160 word-tokens


def _draft(user: str, system: str = SYSTEM) -> CaseDraft:
    return CaseDraft(
        task="t",
        messages=({"role": "system", "content": system}, {"role": "user", "content": user}),
        validator="exact",
        expected="x",
        max_new_tokens=4,
    )


def _document(name: str) -> str:
    return " ".join(f"{name} fact {j}." for j in range(150))  # 600 word-tokens


def test_a_short_system_prompt_before_distinct_requests_is_no_cluster() -> None:
    drafts = [_draft(_document(f"request{i}")) for i in range(4)]
    prompts = [TOK.encode_chat(d.messages) for d in drafts]
    assert 0.2 < shared_share(prompts) < 0.25
    grouped = assign_prefix_groups(drafts, TOK, 128, "t", min_share=0.5)
    assert [d.prefix_group for d in grouped] == [None] * 4
    assert len({d.slices[SHARED_PREFIX] for d in grouped}) == 1
    declared = assign_prefix_groups(drafts, TOK, 128, "t", min_share=0.2)
    assert len({d.prefix_group for d in declared}) == 1 and declared[0].prefix_group is not None
    assert all(SHARED_PREFIX not in d.slices for d in declared)
    assert declared[0].prefix_group == grouped[0].slices[SHARED_PREFIX]  # the same name either way


def test_questions_over_shared_documents_behind_a_system_prompt_are_one_cluster_per_document() -> None:
    """One system prompt, two documents with three short questions each, and one request alone: the group
    sharing the system prompt is under the share, so it is split by the token after it, and each
    document's questions share most of their prompts."""
    drafts = [_draft(f"{_document(doc)} Question {q}?") for doc in ("alpha", "beta") for q in range(3)]
    drafts.append(_draft("Where is my order?"))
    grouped = assign_prefix_groups(drafts, TOK, 128, "t", min_share=0.5)
    groups = [d.prefix_group for d in grouped]
    assert groups[0] == groups[1] == groups[2] is not None and groups[3] == groups[4] == groups[5] is not None
    assert groups[0] != groups[3] and groups[6] is None
    assert len({d.slices[SHARED_PREFIX] for d in grouped}) == 1  # all seven share the system prompt


def test_a_record_naming_its_group_keeps_it_and_prefix_min_tokens_0_groups_nothing() -> None:
    drafts = [_draft("Order 1?"), _draft("Order 2?"), _draft("Order 3?")]
    drafts[0] = CaseDraft(**{**drafts[0].__dict__, "prefix_group": "mine"})
    grouped = assign_prefix_groups(drafts, TOK, 128, "t", min_share=0.5)
    assert grouped[0].prefix_group == "mine" and grouped[1].prefix_group == grouped[2].prefix_group != "mine"
    assert assign_prefix_groups(drafts, TOK, 0, "t", min_share=0.5) == drafts


def _suite(tmp_path: Path, entry: str) -> Path:
    (tmp_path / "t.jsonl").write_text('{"messages": [{"role": "user", "content": "q"}], "expected": "x"}\n')
    spec = tmp_path / "s.toml"
    spec.write_text(f'name = "s"\n{entry}\n')
    return spec


@pytest.mark.parametrize("value", ["1.5", "-0.1", "true", '"half"'])
@pytest.mark.parametrize("table", ["trace", "dataset"])
def test_prefix_min_share_must_be_a_number_in_0_1(tmp_path: Path, table: str, value: str) -> None:
    head = (
        '[[trace]]\npath = "t.jsonl"\nvalidator = "exact"'
        if table == "trace"
        else '[[dataset]]\npath = "json"\ndata_files = "t.jsonl"\nfields = { question = "q", answers = "a" }'
    )
    with pytest.raises(BadInput, match="prefix_min_share must be") as caught:
        parse_suite(_suite(tmp_path, f"{head}\nprefix_min_share = {value}"))
    assert "\n" not in str(caught.value)


def test_prefix_min_share_is_read_from_the_trace_entry(tmp_path: Path) -> None:
    rows = [
        f'{{"messages": [{{"role": "system", "content": "{SYSTEM}"}}, '
        f'{{"role": "user", "content": "{_document(f"r{i}")}"}}], "expected": "x"}}'
        for i in range(3)
    ]
    (tmp_path / "t.jsonl").write_text("\n".join(rows) + "\n")
    spec = tmp_path / "s.toml"
    body = 'name = "s"\n[[trace]]\npath = "t.jsonl"\nvalidator = "exact"\n'
    spec.write_text(body)
    assert {c.prefix_group for c in freeze_cases([parse_suite(spec)], TOK, 0)} == {None}
    spec.write_text(body + "prefix_min_share = 0\n")
    (group,) = {c.prefix_group for c in freeze_cases([parse_suite(spec)], TOK, 0)}
    assert group is not None and group.startswith("trace-")
