"""Freeze suites into cases: run each generator with its own seeded stream, tokenize, assign stable ids."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from kvgate import __version__
from kvgate.errors import BadInput
from kvgate.workload.case import Case, CaseDraft
from kvgate.workload.schema import write_workload
from kvgate.workload.suites import SuiteSpec, resolve_suite
from kvgate.workload.tokenizer import PromptTokenizer


def case_id(suite: str, generator: str, version: str, params: dict[str, Any], seed: int, index: int) -> str:
    """Stable id from suite, generator (and its version), case parameters, seed and index."""
    key = json.dumps([suite, generator, version, params, seed, index], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def freeze_cases(
    suites: list[SuiteSpec], tok: PromptTokenizer, seed: int, limit: int | None = None
) -> list[Case]:
    """All cases of `suites` in order; `limit` keeps that many, spread evenly over the list."""
    from kvgate.validators.registry import get_validator

    cases: list[Case] = []
    for suite in suites:
        for entry_index, entry in enumerate(suite.entries):
            rng = random.Random(f"{seed}:{suite.name}:{entry_index}")
            try:
                drafts = entry.generator.generate(entry.params, rng, tok)
            except ValueError as exc:
                raise BadInput(f"suite {suite.name!r}, generator {entry.generator.name!r}: {exc}") from None
            for index, draft in enumerate(drafts):
                validator = get_validator(draft.validator)
                try:
                    validator.check_args(draft.expected, draft.validator_args)
                except ValueError as exc:
                    raise BadInput(f"suite {suite.name!r}: validator {draft.validator!r}: {exc}") from None
                cid = case_id(
                    suite.name, entry.generator.name, entry.generator.version, draft.params, seed, index
                )
                case = _tokenized(draft, cid, suite.name, tok)
                if index == 0:
                    _check_encoding(case, tok)
                cases.append(case)
    if not cases:
        raise BadInput("the suites produced no cases")
    if limit is not None and limit < len(cases):
        if limit < 1:
            raise BadInput(f"--limit must be ≥ 1, got {limit}")
        step = len(cases) / limit
        cases = [cases[int(i * step)] for i in range(limit)]
    return cases


def _tokenized(draft: CaseDraft, cid: str, suite: str, tok: PromptTokenizer) -> Case:
    ids = tok.encode_chat(draft.messages)
    max_length = getattr(tok, "max_length", None)
    if max_length is not None and len(ids) + draft.max_new_tokens > max_length:
        raise BadInput(
            f"case {cid} of suite {suite!r} needs {len(ids) + draft.max_new_tokens} tokens; "
            f"the model holds {max_length}"
        )
    qstart = tok.question_start(draft.messages, draft.question) if draft.question else None
    return Case(
        case_id=cid,
        suite=suite,
        task=draft.task,
        messages=draft.messages,
        max_new_tokens=draft.max_new_tokens,
        validator=draft.validator,
        expected=draft.expected,
        validator_args=draft.validator_args,
        prefix_group=draft.prefix_group,
        critical=draft.critical,
        slices=draft.slices,
        prompt_token_ids=tuple(ids),
        n_prompt_tokens=len(ids),
        question_start=qstart,
        source_id=draft.params["id"] if isinstance(draft.params.get("id"), str) else None,
    )


def _check_encoding(case: Case, tok: PromptTokenizer) -> None:
    """Re-encode `case` whole with the tokenizer's reference path, where it has one (see
    `chunked_encoding`): a disagreement is a kvgate bug, so it stops the freeze before anything is written."""
    exact = getattr(tok, "encode_chat_exact", None)
    if exact is not None and tuple(exact(case.messages)) != case.prompt_token_ids:
        raise RuntimeError(f"case {case.case_id}: chunked token ids differ from the tokenizer's own encoding")


def freeze(
    suite_names: list[str], out: Path, tok: PromptTokenizer, seed: int = 0, limit: int | None = None
) -> str:
    """Freeze `suite_names` for `tok` into `out`; returns the workload's content sha256."""
    suites = [resolve_suite(name) for name in suite_names]
    cases = freeze_cases(suites, tok, seed, limit)
    meta = {
        "suites": {s.name: s.text for s in suites},
        "generators": {e.generator.name: e.generator.version for s in suites for e in s.entries},
        "seed": seed,
        "limit": limit,
        "tokenizer": tok.name,
        "kvgate_version": __version__,
    }
    return write_workload(cases, out, meta)
