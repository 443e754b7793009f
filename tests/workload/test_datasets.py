"""Dataset-backed suites: [[dataset]] entries loaded through `datasets` from small local files."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from kvgate.errors import BadInput
from kvgate.shipped import suites_dir
from kvgate.workload.freeze import freeze_cases
from kvgate.workload.suites import parse_suite
from kvgate.workload.tokenizer import WordTokenizer

pytest.importorskip("datasets")

TOK = WordTokenizer()
LONGBENCH_FIELDS = '{ context = "context", question = "input", answers = "answers", id = "_id" }'


def longbench_rows(n: int = 3) -> list[dict[str, Any]]:
    """Rows in LongBench's format (its 2wikimqa subset)."""
    return [
        {
            "input": f"Who directed film number {i}?",
            "context": f"Passage 1:\nFilm {i}\nFilm {i} is a drama directed by Director{i} Smith.\n"
            f"Passage 2:\nDirector{i} Smith\nA director born in Lyon.",
            "answers": [f"Director{i} Smith"],
            "length": 20,
            "dataset": "2wikimqa" if i != 1 else "hotpotqa",
            "language": "en",
            "all_classes": None,
            "_id": f"id-{i}",
        }
        for i in range(n)
    ]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def suite(tmp_path: Path, body: str, name: str = "ds") -> Path:
    spec = tmp_path / f"{name}.toml"
    spec.write_text(f'name = "{name}"\n\n[[dataset]]\n{body}\n')
    return spec


def freeze(spec: Path) -> list[Any]:
    return freeze_cases([parse_suite(spec)], TOK, seed=0)


def test_longbench_jsonl(tmp_path: Path, datasets_cache: Path) -> None:
    data = write_jsonl(tmp_path / "2wikimqa.jsonl", longbench_rows())
    spec = suite(
        tmp_path,
        f'path = "json"\ndata_files = "{data}"\nsplit = "train"\nfields = {LONGBENCH_FIELDS}\n'
        'task = "2wikimqa"\nmax_new_tokens = 32\ncritical = true',
    )
    cases = freeze(spec)
    assert len(cases) == 3
    first = cases[0]
    content = first.messages[-1]["content"]
    assert "Film 0 is a drama directed by Director0 Smith." in content
    assert content.endswith("Question: Who directed film number 0?\nAnswer:")
    assert first.expected == ["Director0 Smith"] and first.validator == "substring_any"
    assert first.task == "2wikimqa" and first.critical and first.max_new_tokens == 32
    assert first.slices["ctx_bucket"] == "256"
    # the question starts after the context: "context" scope compresses exactly the passages
    context_end = TOK.question_start(first.messages, "Answer the question based on the given passages. Only")
    assert first.question_start is not None and first.question_start >= context_end
    assert len({c.case_id for c in cases}) == 3
    assert freeze(spec) == cases  # deterministic


def test_longbench_from_a_zip_as_the_shipped_spec_reads_it(tmp_path: Path, datasets_cache: Path) -> None:
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("data/2wikimqa.jsonl", "".join(json.dumps(r) + "\n" for r in longbench_rows(2)))
        z.writestr("data/trec.jsonl", "")
    shipped = (suites_dir() / "longbench-2wikimqa.toml").read_text()
    local = shipped.replace("hf://datasets/THUDM/LongBench/data.zip", str(archive))
    assert local != shipped
    spec = tmp_path / "lb.toml"
    spec.write_text(local)
    cases = freeze(spec)
    assert [c.expected for c in cases] == [["Director0 Smith"], ["Director1 Smith"]]
    assert cases[0].task == "2wikimqa"  # from the data file's name


def test_relative_paths_are_read_beside_the_suite(
    tmp_path: Path, datasets_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "suites"
    (folder / "data" / "qa").mkdir(parents=True)
    write_jsonl(folder / "data" / "2wikimqa.jsonl", longbench_rows(2))
    write_jsonl(folder / "data" / "qa" / "train.jsonl", longbench_rows(3))
    spec = folder / "lb.toml"
    spec.write_text(
        f'name = "lb"\n\n[[dataset]]\npath = "json"\ndata_files = ["data/2wikimqa.jsonl"]\nsplit = "train"\n'
        f'fields = {LONGBENCH_FIELDS}\n\n[[dataset]]\npath = "data/qa"\nsplit = "train"\n'
        f"fields = {LONGBENCH_FIELDS}\n"
    )
    monkeypatch.chdir(folder)
    from_its_folder = freeze(spec)  # where the paths used to be read from: the ids must not change
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cases = freeze(spec)
    assert cases == from_its_folder
    moved = shutil.copytree(folder, tmp_path / "moved")  # ids hash the paths as written, not as resolved
    assert freeze(moved / "lb.toml") == cases
    assert [c.task for c in cases] == ["2wikimqa"] * 2 + ["qa"] * 3  # labels from the paths as written
    spec.write_text(spec.read_text().replace("data/2wikimqa.jsonl", "data/absent.jsonl"))
    with pytest.raises(BadInput, match=re.escape(str(folder / "data" / "absent.jsonl"))) as error:
        freeze(spec)
    assert "\n" not in str(error.value)


def test_where_and_limit(tmp_path: Path, datasets_cache: Path) -> None:
    data = write_jsonl(tmp_path / "mixed.jsonl", longbench_rows(5))
    spec = suite(
        tmp_path,
        f'path = "json"\ndata_files = ["{data}"]\nsplit = "train"\nfields = {LONGBENCH_FIELDS}\n'
        'where = { dataset = "2wikimqa" }\nlimit = 2',
    )
    cases = freeze(spec)
    assert [c.expected for c in cases] == [["Director0 Smith"], ["Director2 Smith"]]


def test_2wikimultihopqa_original_json(tmp_path: Path, datasets_cache: Path) -> None:
    rows = [
        {
            "_id": "a1",
            "type": "compositional",
            "question": "Where was the director of Film A born?",
            "context": [
                ["Film A", ["Film A is a 1999 film.", " It was directed by Ann Lee."]],
                ["Ann Lee", ["Ann Lee was born in Oslo."]],
            ],
            "supporting_facts": [["Film A", 1], ["Ann Lee", 0]],
            "evidences": [["Film A", "director", "Ann Lee"]],
            "answer": "Oslo",
        }
    ]
    data = tmp_path / "dev.json"
    data.write_text(json.dumps(rows))
    spec = suite(
        tmp_path,
        f'path = "json"\ndata_files = "{data}"\nsplit = "train"\n'
        'fields = { context = "context", question = "question", answers = "answer", id = "_id" }\n'
        'validator = "exact"\ntemplate = "Passages:\\n{context}\\n\\nQuestion: {question}"',
    )
    (case,) = freeze(spec)
    content = case.messages[-1]["content"]
    assert "Passage 1:\nFilm A\nFilm A is a 1999 film. It was directed by Ann Lee." in content
    assert "Passage 2:\nAnn Lee\nAnn Lee was born in Oslo." in content
    assert case.expected == ["Oslo"] and case.validator == "exact" and case.task == "dev"


def test_2wikimultihopqa_hugging_face_parquet(tmp_path: Path, datasets_cache: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.Table.from_pylist(
        [
            {
                "id": "b2",
                "question": "Which film came out first?",
                "answer": "Film B",
                "context": {
                    "title": ["Film B", "Film C"],
                    "sentences": [["Film B is from 1950."], ["Film C is new."]],
                },
            }
        ]
    )
    data = tmp_path / "validation.parquet"
    pq.write_table(table, data)
    spec = suite(
        tmp_path,
        f'path = "parquet"\ndata_files = "{data}"\nsplit = "train"\n'
        'fields = { context = "context", question = "question", answers = "answer" }',
    )
    (case,) = freeze(spec)
    assert "Passage 2:\nFilm C\nFilm C is new." in case.messages[-1]["content"]
    assert case.expected == ["Film B"]


def test_max_tokens_truncates_the_middle_of_the_context(tmp_path: Path, datasets_cache: Path) -> None:
    words = [f"w{i}" for i in range(3000)]
    row = {"context": " ".join(words), "input": "What is the first word?", "answers": ["w0"], "_id": "x"}
    data = write_jsonl(tmp_path / "long.jsonl", [row])
    spec = suite(
        tmp_path,
        f'path = "json"\ndata_files = "{data}"\nsplit = "train"\nfields = {LONGBENCH_FIELDS}\n'
        "max_tokens = 1000",
    )
    (case,) = freeze(spec)
    content = case.messages[-1]["content"]
    assert 980 <= case.n_prompt_tokens <= 1000
    assert "w0 w1 " in content and "w2998 w2999" in content and " w1500 " not in content
    assert content.endswith("Question: What is the first word?\nAnswer:")
    assert case.slices["ctx_bucket"] == "1k"


def test_shared_contexts_get_a_prefix_group(tmp_path: Path, datasets_cache: Path) -> None:
    context = " ".join(f"fact{i}." for i in range(300))
    rows = [{"context": context, "input": q, "answers": ["a"], "_id": q} for q in ("First?", "Second?")]
    rows.append({"context": "Something else entirely.", "input": "Third?", "answers": ["a"], "_id": "3"})
    data = write_jsonl(tmp_path / "shared.jsonl", rows)
    spec = suite(
        tmp_path,
        f'path = "json"\ndata_files = "{data}"\nsplit = "train"\nfields = {LONGBENCH_FIELDS}\n'
        'template = "{context}\\n\\nQuestion: {question}"\nprefix_min_tokens = 200',
    )
    first, second, third = freeze(spec)
    assert first.prefix_group is not None and first.prefix_group == second.prefix_group
    assert third.prefix_group is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('path = "json"\nfields = { question = "input" }', "missing key 'answers'"),
        ('path = "json"\nfields = { question = "q", answers = "a", title = "t" }', "unknown key 'title'"),
        (
            'path = "json"\nfields = { question = "q", answers = "a" }\ntemplate = "no placeholders"',
            "template",
        ),
        (
            'path = "json"\nfields = { context = "c", question = "q", answers = "a" }\n'
            'template = "{question} {context}"',
            "in that order",
        ),
        ('path = "json"\nfields = { question = "q", answers = "a" }\nlimitt = 3', "did you mean 'limit'"),
    ],
)
def test_bad_specs_are_refused_at_parse_time(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        parse_suite(suite(tmp_path, body))


def test_missing_column_names_the_columns_there_are(tmp_path: Path, datasets_cache: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", longbench_rows(1))
    spec = suite(
        tmp_path,
        f'path = "json"\ndata_files = "{data}"\nsplit = "train"\n'
        'fields = { context = "context", question = "question", answers = "answers" }',
    )
    with pytest.raises(BadInput, match=r"no column 'question'; it has: .*input"):
        freeze(spec)


def test_unloadable_data_is_bad_input(tmp_path: Path, datasets_cache: Path) -> None:
    spec = suite(
        tmp_path,
        f'path = "json"\ndata_files = "{tmp_path / "absent.jsonl"}"\nsplit = "train"\n'
        'fields = { question = "q", answers = "a" }',
    )
    with pytest.raises(BadInput, match="cannot load dataset 'json'"):
        freeze(spec)


def test_a_row_without_answers_names_the_row(tmp_path: Path, datasets_cache: Path) -> None:
    rows = longbench_rows(2)
    rows[1]["answers"] = []
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    spec = suite(
        tmp_path, f'path = "json"\ndata_files = "{data}"\nsplit = "train"\nfields = {LONGBENCH_FIELDS}'
    )
    with pytest.raises(BadInput, match="row 1: answers must be"):
        freeze(spec)
