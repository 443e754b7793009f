"""Dataset-backed suites: question-answering rows loaded with Hugging Face `datasets`.

A suite spec names the data and how its columns map onto a case, in ``[[dataset]]`` tables:

    [[dataset]]
    path = "json"                                   # a hub id or a builder ("json", "parquet", "csv")
    data_files = "zip://data/2wikimqa.jsonl::hf://datasets/THUDM/LongBench/data.zip"
    split = "train"
    fields = { context = "context", question = "input", answers = "answers", id = "_id" }
    validator = "substring_any"
    limit = 100
    max_new_tokens = 32

The rows are read with ``datasets.load_dataset(path, name, split=..., data_files=..., revision=...)``,
so anything `datasets` can load works: hub datasets in a standard format, local JSONL/JSON/Parquet/CSV
files, and archives through fsspec chains as above. Data sets published with a loading script
(LongBench's own ``THUDM/LongBench``) no longer load by hub id since `datasets` 4; point ``data_files``
at their data files instead.

Relative local paths are relative to the suite file's folder, whatever the working directory: each
``data_files`` entry (globs included) unless it is a URL (``scheme://``, so ``hf://`` too) or an fsspec
chain (``::``), which pass to `datasets` as written, and ``path`` when it names a file or folder beside
the suite or starts with ``.``; any other ``path`` is a builder name or a hub id and stays as written.
Absolute paths are used as they are. Inside a chain, a local archive path is fsspec's own, so write it
absolute.

Each row becomes one user message rendered from ``template`` (``{context}`` and ``{question}``; literal
braces doubled); the case's ``question`` is the template's text from the end of ``{context}`` on, so
``scope = "context"`` eviction compresses exactly the context. Context columns may be a string, a list
of strings, a list of ``[title, sentences]`` pairs (2WikiMultihopQA and HotpotQA's original JSON), or
``{"title": [...], "sentences": [[...], ...]}`` (their Hugging Face form); passages render as
"Passage i:\\ntitle\\ntext", as LongBench does. ``max_tokens`` truncates long contexts in the middle,
word by word, until the prompt fits (LongBench keeps the head and tail the same way). Rows are taken in
order; ``where`` keeps only rows whose columns equal the given values; ``limit`` stops after that many.
Cases are sliced by ``ctx_bucket``, the measured prompt length rounded up to a power of two.
``prefix_min_tokens`` (0: off) and ``prefix_min_share`` (0.5) group rows that share a prompt prefix into
one cluster as ``[[trace]]`` does (`prefix_groups`).
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from kvgate.errors import BadInput
from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.base import Messages, fit_to_length
from kvgate.workload.generators.common import length_bucket
from kvgate.workload.prefix_groups import assign_prefix_groups, check_min_share
from kvgate.workload.tokenizer import PromptTokenizer

DEFAULT_TEMPLATE = (
    "Answer the question based on the given passages. Only give me the answer and do not output any "
    "other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the "
    "given passages. Only give me the answer and do not output any other words.\n\nQuestion: {question}\n"
    "Answer:"
)
"""LongBench's prompt for its multi-document QA sets (2wikimqa, hotpotqa, musique)."""
CLOSED_BOOK_TEMPLATE = (
    "Answer the question. Only give me the answer and do not output any other words.\n\n"
    "Question: {question}\nAnswer:"
)
"""The default when the spec maps no context column."""

FILE_BUILDERS = {"json", "parquet", "csv", "text", "arrow"}
FIELD_KEYS = {"context", "question", "answers", "id"}
REQUIRED_FIELDS = {"question", "answers"}


@dataclass(frozen=True)
class DatasetParams:
    path: str
    fields: dict[str, str]
    """Column names: ``question`` and ``answers`` (required), ``context`` and ``id`` (optional)."""
    name: str | None = None
    split: str = "test"
    data_files: str | tuple[str, ...] | None = None
    revision: str | None = None
    where: dict[str, Any] = field(default_factory=dict)
    template: str | None = None
    """Default: `DEFAULT_TEMPLATE`, or `CLOSED_BOOK_TEMPLATE` without a context column."""
    system: str | None = None
    task: str | None = None
    """Slice label; default: see `label`."""
    validator: str = "substring_any"
    validator_args: dict[str, Any] = field(default_factory=dict)
    limit: int | None = None
    max_new_tokens: int = 64
    max_tokens: int | None = None
    prefix_min_tokens: int = 0
    """When > 0, cases whose prompts share their first this-many tokens, and at least
    `prefix_min_share` of their tokens, get a common `prefix_group` (`prefix_groups`)."""
    prefix_min_share: float = 0.5
    critical: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise ValueError("path must be a non-empty string")
        if not isinstance(self.fields, dict):
            raise ValueError('fields must be a table such as {question = "input", answers = "answers"}')
        unknown = sorted(set(self.fields) - FIELD_KEYS)
        if unknown:
            raise ValueError(f"fields: unknown key {unknown[0]!r}; known: {', '.join(sorted(FIELD_KEYS))}")
        missing = sorted(REQUIRED_FIELDS - set(self.fields))
        if missing:
            raise ValueError(f"fields: missing key {missing[0]!r}")
        if not all(isinstance(v, str) and v for v in self.fields.values()):
            raise ValueError("fields: every value must be a column name")
        if isinstance(self.data_files, tuple) and not all(isinstance(f, str) for f in self.data_files):
            raise ValueError("data_files must be a path or a list of paths")
        if not isinstance(self.where, dict):
            raise ValueError("where must be a table of column = value")
        if self.template is not None and not isinstance(self.template, str):
            raise ValueError("template must be a string")
        _check_template(self.prompt_template, "context" in self.fields)
        for key in ("limit", "max_tokens"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{key} must be an integer ≥ 1")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be an integer ≥ 1")
        if not isinstance(self.prefix_min_tokens, int) or self.prefix_min_tokens < 0:
            raise ValueError("prefix_min_tokens must be an integer ≥ 0")
        check_min_share(self.prefix_min_share)
        if not isinstance(self.validator_args, dict):
            raise ValueError("validator_args must be a table")

    @property
    def prompt_template(self) -> str:
        if self.template is not None:
            return self.template
        return DEFAULT_TEMPLATE if "context" in self.fields else CLOSED_BOOK_TEMPLATE

    @property
    def label(self) -> str:
        """The task slice: ``task``, else ``name``, else the data file's stem for a file builder
        ("zip://data/2wikimqa.jsonl::..." → "2wikimqa"), else the last part of ``path``."""
        if self.task or self.name:
            return str(self.task or self.name)
        files = self.data_files if isinstance(self.data_files, tuple) else (self.data_files,)
        if self.path in FILE_BUILDERS and len(files) == 1 and files[0]:
            return PurePosixPath(files[0].split("::")[0]).name.split(".")[0]
        return self.path.rstrip("/").split("/")[-1]


def _check_template(template: str, has_context: bool) -> None:
    try:
        names = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ValueError(f"template: {exc} (write literal braces as {{{{ and }}}})") from None
    wanted = ["context", "question"] if has_context else ["question"]
    if names != wanted:
        if has_context:
            raise ValueError("template must contain {context} then {question}, once each, in that order")
        raise ValueError(
            "template must contain {question} once (and no {context}: no context column is mapped)"
        )


def render_context(value: Any) -> str:
    """A context column as text: see the module docstring for the accepted shapes."""
    if isinstance(value, str):
        return value
    if (
        isinstance(value, dict)
        and isinstance(value.get("title"), list)
        and isinstance(value.get("sentences"), list)
    ):
        value = list(zip(value["title"], value["sentences"], strict=True))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n\n".join(value)
    if isinstance(value, list | tuple) and all(
        isinstance(p, list | tuple) and len(p) == 2 and isinstance(p[0], str) for p in value
    ):
        passages = []
        for i, (title, text) in enumerate(value, 1):
            body = text if isinstance(text, str) else "".join(str(s) for s in text)
            passages.append(f"Passage {i}:\n{title}\n{body}")
        return "\n\n".join(passages)
    raise ValueError(f"unsupported context of type {type(value).__name__}")


def _answers(value: Any) -> list[str]:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, list) and value and all(isinstance(v, str | int | float) for v in value):
        answers = [str(v) for v in value if str(v).strip()]
        if answers:
            return answers
    raise ValueError(f"answers must be a non-empty string or list of strings, got {value!r}")


_PIECES = re.compile(r"\s*\S+\s*")


@dataclass(frozen=True)
class DatasetSource:
    """The `Generator` behind ``[[dataset]]`` suite entries."""

    name: str = "dataset"
    version: str = "2"
    """2: prefix groups need `prefix_min_share` of their prompts."""
    params_type: type = DatasetParams
    folder: Path = Path()
    """Where relative local paths are read from: the suite file's folder (`parse_suite` sets it)."""

    def generate(self, params: DatasetParams, rng: random.Random, tok: PromptTokenizer) -> list[CaseDraft]:
        rows = load_rows(params, self.folder)
        drafts = []
        for index, row in rows:
            where = f"dataset {params.path!r} row {index}"
            try:
                draft = self._draft(params, index, row, tok)
            except ValueError as exc:
                raise BadInput(f"{where}: {exc}") from None
            drafts.append(draft)
        if not drafts:
            raise BadInput(f"dataset {params.path!r} ({params.split}) has no rows to use")
        if params.prefix_min_tokens:
            drafts = assign_prefix_groups(
                drafts, tok, params.prefix_min_tokens, params.label, min_share=params.prefix_min_share
            )
        return drafts

    def _draft(self, p: DatasetParams, index: int, row: dict[str, Any], tok: PromptTokenizer) -> CaseDraft:
        question_text = row[p.fields["question"]]
        if not isinstance(question_text, str) or not question_text.strip():
            raise ValueError(f"column {p.fields['question']!r} must be a non-empty string")
        answers = _answers(row[p.fields["answers"]])
        context = render_context(row[p.fields["context"]]) if "context" in p.fields else None
        template = p.prompt_template
        tail = template.partition("{context}")[2]
        question = (tail if context is not None else template).format(question=question_text).strip()
        system = ({"role": "system", "content": p.system},) if p.system else ()

        def build_with(ctx: str | None) -> Messages:
            content = template.format(question=question_text, **({"context": ctx} if ctx is not None else {}))
            return (*system, {"role": "user", "content": content})

        messages = build_with(context)
        if p.max_tokens is not None and context is not None and tok.count_chat(messages) > p.max_tokens:
            pieces = _PIECES.findall(context)

            def build(n: int) -> Messages:
                keep = min(n, len(pieces))
                return build_with("".join(pieces[: (keep + 1) // 2] + pieces[len(pieces) - keep // 2 :]))

            messages = build(
                fit_to_length(build, p.max_tokens, tok, hi=max(2, min(len(pieces), p.max_tokens)))
            )
        row_id = row.get(p.fields["id"]) if "id" in p.fields else None
        return CaseDraft(
            task=p.label,
            messages=messages,
            validator=p.validator,
            expected=answers,
            max_new_tokens=p.max_new_tokens,
            validator_args=dict(p.validator_args),
            question=question,
            critical=p.critical,
            slices={"ctx_bucket": length_bucket(tok.count_chat(messages))},
            params={
                "path": p.path,
                "name": p.name,
                "split": p.split,
                "data_files": list(p.data_files) if isinstance(p.data_files, tuple) else p.data_files,
                "row": index,
                "id": None if row_id is None else str(row_id),
                "max_tokens": p.max_tokens,
            },
        )


def _data_file(folder: Path, value: str) -> str:
    """A ``data_files`` entry read from `folder` when it is a relative local path; URLs and fsspec chains
    as written (an absolute path stays absolute under the join)."""
    return value if "://" in value or "::" in value else str(folder / value)


def _dataset_path(folder: Path, value: str) -> str:
    """``path`` read from `folder` when it is local; a builder name or hub id as written."""
    if value in FILE_BUILDERS or "://" in value:
        return value
    local = folder / value
    return str(local) if value.startswith(".") or local.exists() else value


def load_rows(p: DatasetParams, folder: Path = Path()) -> list[tuple[int, dict[str, Any]]]:
    """(row index, row) pairs after ``where`` and ``limit``, relative local paths read from `folder`;
    loading problems are BadInput."""
    try:
        import datasets
    except ImportError:
        raise BadInput("dataset suites need the `datasets` package: pip install 'kvgate[datasets]'") from None
    what = f"dataset {p.path!r}" + (f" ({p.name})" if p.name else "")
    data_files: str | list[str] | None = None
    if isinstance(p.data_files, tuple):
        data_files = [_data_file(folder, f) for f in p.data_files]
    elif p.data_files is not None:
        data_files = _data_file(folder, p.data_files)
    try:
        ds = datasets.load_dataset(
            _dataset_path(folder, p.path), p.name, split=p.split, data_files=data_files, revision=p.revision
        )
    except Exception as exc:  # the loader raises many kinds: network, missing files, bad format, split
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise BadInput(
            f"cannot load {what}, split {p.split!r}: {first[:300]} "
            "(no network? point data_files at local files)"
        ) from None
    needed = set(p.fields.values()) | set(p.where)
    missing = sorted(needed - set(ds.column_names))
    if missing:
        raise BadInput(f"{what} has no column {missing[0]!r}; it has: {', '.join(ds.column_names)}")
    rows: list[tuple[int, dict[str, Any]]] = []
    for index, row in enumerate(ds):
        if all(row[k] == v for k, v in p.where.items()):
            rows.append((index, row))
            if p.limit is not None and len(rows) >= p.limit:
                break
    return rows
