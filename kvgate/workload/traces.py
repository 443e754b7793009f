"""Trace import: recorded chat requests (OpenAI chat format) as workload cases.

A suite spec names the trace in a ``[[trace]]`` table:

    [[trace]]
    path = "traces/support-bot.jsonl"     # JSON Lines, or .parquet; relative to the suite file's folder
    validator = "exact"                   # for records that name none
    prefix_min_tokens = 128
    prefix_min_share = 0.5

``path`` is a local file: a relative one is read from the folder of the suite file, whatever the working
directory, and an absolute one as it is.

One record per line (or Parquet row)::

    {"messages": [{"role": "system", "content": "..."}, {"role": "user", "content": "..."}],
     "tools": [...], "expected": ..., "validator": "tool_call", "validator_args": {...},
     "max_tokens": 64, "id": "req-17", "task": "support", "slices": {"tenant": "acme"}}

``messages`` is required; message content may be a string or a list of ``{"type": "text", "text": ...}``
parts, and an assistant message with ``tool_calls`` and no content keeps the calls as JSON text.
In Parquet, ``messages``, ``tools``, ``validator_args`` and ``slices`` may be JSON text, and an
``expected_json`` text column stands in for ``expected`` where answers differ in type from row to row.
``tools`` (OpenAI function specs) are described in the system message (prepended to the trace's own
system message), since a workload row holds messages only. ``expected`` is required unless the spec sets
``skip_unlabelled``, which drops unlabelled records; a trace without answers cannot be judged. Other
request keys (model, temperature, ...) are ignored: every arm runs with the matrix's sampling settings.
``max_tokens`` or ``max_completion_tokens`` sets the case's ``max_new_tokens``.

Slices describe the request's shape: ``ctx_bucket`` (the prompt's tokens, rounded up to a power of two)
and ``turns`` (user messages: "1", "2", "3-4", "5-8", "9+"), plus the record's own ``slices``. Cases
whose token-encoded prompts share their first ``prefix_min_tokens`` tokens (a common system prompt,
few-shot block or document), and at least ``prefix_min_share`` of their prompt tokens, get one
``prefix_group``: one cluster for the gate (`prefix_groups`). A shared prefix under that share (a short
system prompt before distinct requests) makes no cluster; its records carry its name in the slice
``shared_prefix``. The question (for
``scope = "context"``, which keeps it out of eviction) is the last user message; a record whose last
message holds context and question together marks where the question begins with ``question`` (its exact
text, found inside that message) or ``question_offset`` (a character offset into it).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvgate.bounded_file import read_text
from kvgate.errors import BadInput
from kvgate.spec_kinds import wrong_kind
from kvgate.tomlspec import toml_text_kind
from kvgate.workload.case import CaseDraft
from kvgate.workload.generators.common import length_bucket
from kvgate.workload.generators.tool_call import tools_system_prompt
from kvgate.workload.prefix_groups import assign_prefix_groups, check_min_share
from kvgate.workload.tokenizer import PromptTokenizer

ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class TraceParams:
    path: str
    validator: str | None = None
    """Validator for records that name none; None makes such records an error."""
    validator_args: dict[str, Any] | None = None
    max_new_tokens: int = 256
    prefix_min_tokens: int = 128
    prefix_min_share: float = 0.5
    limit: int | None = None
    skip_unlabelled: bool = False
    task: str = "trace"
    critical: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise ValueError("path must be a non-empty string")
        if Path(self.path).suffix.lower() not in (".jsonl", ".json", ".ndjson", ".parquet"):
            raise ValueError(f"path must end in .jsonl, .json, .ndjson or .parquet, got {self.path!r}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be an integer ≥ 1")
        if not isinstance(self.prefix_min_tokens, int) or self.prefix_min_tokens < 0:
            raise ValueError("prefix_min_tokens must be an integer ≥ 0 (0: no prefix groups)")
        check_min_share(self.prefix_min_share)
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 1):
            raise ValueError("limit must be an integer ≥ 1")
        if self.validator_args is not None and not isinstance(self.validator_args, dict):
            raise ValueError("validator_args must be a table")


MAX_TRACE_BYTES = 1 << 30
"""Largest JSON Lines trace read (1 GiB), checked before reading."""


def read_records(path: Path) -> list[tuple[str, int, dict[str, Any]]]:
    """(where, number, record) from a JSON Lines or Parquet trace: `where` is "file:line" or "file row n"
    and `number` the line or row number (1-based). A JSON Lines trace is read as every spec is
    (`bounded_file.read_text`: a regular file only, never a pipe waited on; size first; UTF-8)."""
    if not path.exists():
        raise BadInput(f"trace {path} does not exist")
    if path.suffix.lower() == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        from kvgate.workload.schema import META_KEY

        if not path.is_file():
            raise BadInput(f"trace {path} is not a regular file; kvgate reads only regular files")
        try:
            parquet = pq.ParquetFile(path)
            frozen = META_KEY in (parquet.schema_arrow.metadata or {})
            rows = [] if frozen else parquet.read().to_pylist()
        except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:  # the last: a garbled column name
            raise BadInput(
                f"trace {path} is not readable Parquet ({str(exc).splitlines()[0]}): it is damaged or cut "
                "short; export it again (or copy it whole)"
            ) from None
        if frozen:  # a frozen workload's rows read as requests would be frozen a second time
            raise BadInput(wrong_kind(str(path), "workload", "trace"))
        return [(f"{path} row {i}", i, row) for i, row in enumerate(rows, 1)]
    records: list[tuple[str, int, dict[str, Any]]] = []
    try:
        text = read_text(path, MAX_TRACE_BYTES, "trace")
    except FileNotFoundError:
        raise BadInput(f"trace {path} does not exist") from None
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors save UTF-8 with
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            kind = None if records else toml_text_kind(text)
            if kind is not None:  # a suite, matrix or policy given where a trace belongs
                raise BadInput(wrong_kind(str(path), kind, "trace")) from None
            if not records:
                _refuse_one_json_document(path, text)
            raise BadInput(f"{where}: not valid JSON: {exc.msg} (column {exc.colno})") from None
        except RecursionError:
            raise BadInput(f"{where}: nested thousands of levels deep; no request is") from None
        if not isinstance(record, dict):
            if not records:
                _refuse_one_json_document(path, text)
            raise BadInput(f"{where}: a record must be a JSON object, got {type(record).__name__}")
        records.append((where, lineno, record))
    return records


def _refuse_one_json_document(path: Path, text: str) -> None:
    """BadInput when the whole of `text` is one JSON array or object (a pretty-printed record, a list of
    records) rather than JSON lines; nothing when it is not."""
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return
    if isinstance(document, list | dict):
        lines = len(text.splitlines())
        shape = "one JSON array" if isinstance(document, list) else f"one JSON object over {lines} lines"
        raise BadInput(
            f"trace {path} is {shape}, not JSON lines: write each request as one JSON object on a line "
            "of its own"
        )


def _json_field(value: Any) -> Any:
    """Parquet traces may store nested fields as JSON text."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise ValueError("only text content parts are supported")
            parts.append(part["text"])
        return "".join(parts)
    if content is None and message.get("tool_calls"):
        return json.dumps(message["tool_calls"], ensure_ascii=False)
    raise ValueError(f"message content must be a string or a list of text parts, got {content!r}")


def normalise_messages(raw: Any, tools: Any) -> tuple[dict[str, str], ...]:
    """OpenAI chat messages as {role, content} strings, with `tools` described in the system message."""
    raw = _json_field(raw)
    if not isinstance(raw, list) or not raw:
        raise ValueError("messages must be a non-empty list")
    messages = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise ValueError(f"message {i} must be an object with a role in {', '.join(ROLES)}")
        messages.append({"role": str(m["role"]), "content": _content(m)})
    if messages[-1]["role"] not in ("user", "tool"):
        raise ValueError("the last message must come from the user or a tool: the model answers it")
    tools = _json_field(tools)
    if tools:
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise ValueError("tools must be a list of tool specs")
        text = tools_system_prompt(tools)
        if messages[0]["role"] == "system":
            messages[0] = {"role": "system", "content": f"{messages[0]['content']}\n\n{text}"}
        else:
            messages.insert(0, {"role": "system", "content": text})
    return tuple(messages)


def turns_bucket(n_user: int) -> str:
    for edge, label in ((1, "1"), (2, "2"), (4, "3-4"), (8, "5-8")):
        if n_user <= edge:
            return label
    return "9+"


@dataclass(frozen=True)
class TraceSource:
    """The `Generator` behind ``[[trace]]`` suite entries."""

    name: str = "trace"
    version: str = "2"
    """2: prefix groups need `prefix_min_share` of their prompts."""
    params_type: type = TraceParams
    folder: Path = Path()
    """Where a relative ``path`` is read from: the suite file's folder (`parse_suite` sets it)."""

    def generate(self, params: TraceParams, rng: random.Random, tok: PromptTokenizer) -> list[CaseDraft]:
        path = self.folder / params.path
        drafts: list[CaseDraft] = []
        for where, number, record in read_records(path):
            if params.limit is not None and len(drafts) >= params.limit:
                break
            try:
                draft = self._draft(params, path, number, record, tok)
            except ValueError as exc:
                raise BadInput(f"{where}: {exc}") from None
            if draft is not None:
                drafts.append(draft)
        if not drafts:
            raise BadInput(f"trace {path} has no usable records")
        return assign_prefix_groups(
            drafts, tok, params.prefix_min_tokens, params.task, min_share=params.prefix_min_share
        )

    def _draft(
        self, p: TraceParams, path: Path, number: int, record: dict[str, Any], tok: PromptTokenizer
    ) -> CaseDraft | None:
        if "messages" not in record:
            raise ValueError("missing key 'messages'")
        messages = normalise_messages(record["messages"], record.get("tools"))
        expected = record.get("expected")
        if expected is None and isinstance(record.get("expected_json"), str):
            try:
                expected = json.loads(record["expected_json"])
            except json.JSONDecodeError as exc:
                raise ValueError(f"expected_json is not valid JSON: {exc.msg}") from None
        if expected is None:
            if p.skip_unlabelled:
                return None
            raise ValueError("no 'expected' answer (set skip_unlabelled = true to drop such records)")
        if record.get("validator") is not None:
            validator, args = record["validator"], _json_field(record.get("validator_args")) or {}
        else:  # the spec's validator, with the spec's arguments unless the record brings its own
            validator = p.validator
            args = _json_field(record.get("validator_args")) or p.validator_args or {}
        if not isinstance(validator, str):
            raise ValueError("no 'validator' in the record and none in the suite's [[trace]] entry")
        if not isinstance(args, dict):
            raise ValueError("validator_args must be an object")
        max_new = next(
            (record[k] for k in ("max_completion_tokens", "max_tokens") if record.get(k) is not None),
            p.max_new_tokens,
        )
        if not isinstance(max_new, int) or isinstance(max_new, bool) or max_new < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {max_new!r}")
        slices = _json_field(record.get("slices")) or {}
        if not isinstance(slices, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in slices.items()
        ):
            raise ValueError("slices must be an object of string values")
        task = record.get("task") or p.task
        if not isinstance(task, str):
            raise ValueError("task must be a string")
        critical = record.get("critical", p.critical)
        if not isinstance(critical, bool):
            raise ValueError("critical must be true or false")
        group = record.get("prefix_group")
        if group is not None and not isinstance(group, str):
            raise ValueError("prefix_group must be a string")
        user_turns = [m for m in messages if m["role"] == "user"]
        question = _question(record, messages)
        return CaseDraft(
            task=task,
            messages=messages,
            validator=validator,
            expected=expected,
            max_new_tokens=max_new,
            validator_args=args,
            question=question,
            prefix_group=group,
            critical=critical,
            slices={
                **slices,
                "ctx_bucket": length_bucket(tok.count_chat(messages)),
                "turns": turns_bucket(len(user_turns)),
            },
            params={
                "trace": path.name,
                "record": number,
                "id": None if record.get("id") is None else str(record["id"]),
            },
        )


def _question(record: dict[str, Any], messages: tuple[dict[str, str], ...]) -> str | None:
    """Where the question begins in the last user message: the record's ``question`` text or
    ``question_offset``, else the whole message; None when the last message is not the user's."""
    text, offset = record.get("question"), record.get("question_offset")
    last = messages[-1]["content"] if messages[-1]["role"] == "user" else None
    if text is None and offset is None:
        return last
    if last is None:
        raise ValueError("question and question_offset need the last message to be the user's")
    if text is not None and offset is not None:
        raise ValueError("give question or question_offset, not both")
    if text is not None:
        if not isinstance(text, str) or not text.strip() or text not in last:
            raise ValueError("question must be non-empty text found inside the last user message")
        return text
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset < len(last):
        raise ValueError(f"question_offset must be an integer in [0, {len(last)}), got {offset!r}")
    return last[offset:]
