"""One workload case: what a generator drafts and what a frozen workload row holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SLICE_COLUMNS = ("task", "ctx_bucket", "depth_bucket")
"""Slice columns every generated case carries; suites may add more in `CaseDraft.slices`."""


@dataclass(frozen=True)
class CaseDraft:
    """A case as a generator writes it, before freezing assigns an id and token ids.

    `messages` is an OpenAI-style chat list. `question` is the exact text, contained in the last user
    message, where the question begins (freezing maps it to `question_start`, a token index, for
    `scope = "context"` eviction); None when the case has no separable question. `expected` and
    `validator_args` are JSON-able and go to the validator named `validator`.
    """

    task: str
    messages: tuple[dict[str, str], ...]
    validator: str
    expected: Any
    max_new_tokens: int
    validator_args: dict[str, Any] = field(default_factory=dict)
    question: str | None = None
    prefix_group: str | None = None
    critical: bool = False
    slices: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    """Generator parameters that identify the case (length, depth, index…); part of its case_id."""


SOURCE_ID = "source_id"
"""The workload's optional column of record ids: written only when a case has one, and hashed only where
a case has one, so workloads without ids keep their content hash."""


@dataclass(frozen=True)
class Case:
    """A frozen workload row (docs/reference.md, "Workload Parquet")."""

    case_id: str
    suite: str
    task: str
    messages: tuple[dict[str, str], ...]
    max_new_tokens: int
    validator: str
    expected: Any
    validator_args: dict[str, Any]
    prefix_group: str | None
    critical: bool
    slices: dict[str, str]
    prompt_token_ids: tuple[int, ...] | None = None
    n_prompt_tokens: int | None = None
    question_start: int | None = None
    source_id: str | None = None
    """The record's own id in its trace or data set (`"id": "req-17"`), for tracing a failure back."""


def case_labels(case: Case) -> dict[str, str]:
    """The labels a slice name (`column=value[/column=value]`) matches against: the case's slices and
    its task."""
    return {**case.slices, "task": case.task}
