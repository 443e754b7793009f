"""The shipped suite specs parse and freeze, and suite files take [[dataset]] and [[trace]] entries."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvgate.errors import BadInput
from kvgate.shipped import suites_dir
from kvgate.workload.freeze import freeze_cases
from kvgate.workload.suites import parse_suite, resolve_suite
from kvgate.workload.tokenizer import WordTokenizer

TOK = WordTokenizer()


@pytest.mark.parametrize("name", ["ruler", "structured", "longbench-2wikimqa"])
def test_shipped_suites_parse(name: str) -> None:
    spec = resolve_suite(name)
    assert spec.name == name and spec.entries and spec.description


def test_ruler_freezes_every_task(tmp_path: Path) -> None:
    # the shipped mix at its shortest length only, to keep the test fast
    text = re.sub(r"lengths = \[[^\]]*\]", "lengths = [1024]", (suites_dir() / "ruler.toml").read_text())
    spec = tmp_path / "ruler.toml"
    spec.write_text(text)
    cases = freeze_cases([parse_suite(spec)], TOK, seed=0)
    tasks = {c.task for c in cases}
    assert tasks == {
        "niah_single",
        "niah_multikey",
        "niah_multivalue",
        "niah_multiquery",
        "variable_tracking",
        "cwe",
        "fwe",
        "kv_retrieval",
    }
    assert len({c.case_id for c in cases}) == len(cases)
    assert all(c.slices["ctx_bucket"] == "1k" and c.n_prompt_tokens <= 1024 for c in cases)
    assert all(c.question_start is not None for c in cases)


def test_structured_freezes() -> None:
    cases = freeze_cases([resolve_suite("structured")], TOK, seed=0)
    assert {c.validator for c in cases} == {"json_schema", "tool_call", "python_tests"}
    assert len({c.case_id for c in cases}) == len(cases)


def test_a_suite_of_only_traces(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"messages": [{"role": "user", "content": "Say hi."}], "expected": "hi"}\n')
    spec = tmp_path / "s.toml"
    spec.write_text(f'name = "s"\n[[trace]]\npath = "{trace}"\nvalidator = "exact"\n')
    (entry,) = parse_suite(spec).entries
    assert entry.generator.name == "trace"


def test_a_suite_needs_an_entry_and_known_sections(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('name = "s"\n')
    with pytest.raises(BadInput, match=r"no \[\[generate\]\], \[\[dataset\]\] or \[\[trace\]\] entries"):
        parse_suite(spec)
    spec.write_text('name = "s"\n[[datasets]]\npath = "x"\n')
    with pytest.raises(BadInput, match="did you mean 'dataset'"):
        parse_suite(spec)
    spec.write_text('name = "s"\n[[trace]]\npath = "x.jsonl"\nvalidatorr = "exact"\n')
    with pytest.raises(BadInput, match=r"\[\[trace\]\] #1: unknown key 'validatorr'"):
        parse_suite(spec)


def test_a_mixed_suite_freezes_to_parquet_and_reads_back(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    from kvgate.workload.freeze import freeze
    from kvgate.workload.schema import read_workload

    data = tmp_path / "qa.jsonl"
    data.write_text(
        '{"ctx": "The sky was green that day.", "q": "What colour was the sky?", "a": ["green"]}\n'
    )
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"messages": [{"role": "user", "content": "Say hi."}], "expected": "hi", "validator": "exact"}\n'
    )
    spec = tmp_path / "mixed.toml"
    spec.write_text(
        'name = "mixed"\n'
        '[[generate]]\ngenerator = "needle"\nlengths = [256]\ndepths = [0.5]\n'
        f'[[dataset]]\npath = "json"\ndata_files = "{data}"\nsplit = "train"\n'
        'fields = { context = "ctx", question = "q", answers = "a" }\n'
        f'[[trace]]\npath = "{trace}"\n'
    )
    out = tmp_path / "w.parquet"
    sha = freeze([str(spec)], out, TOK, seed=3)
    workload = read_workload(out)
    assert workload.sha256 == sha
    assert [c.task for c in workload.cases] == ["niah_single", "qa", "trace"]
    assert {"ctx_bucket", "depth_bucket", "turns"} <= set(workload.slice_columns)
    assert workload.meta["generators"] == {"needle": "1", "dataset": "2", "trace": "2"}
