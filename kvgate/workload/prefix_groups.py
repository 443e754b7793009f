"""Prefix groups of imported prompts: which trace records or data-set rows the gate counts as one cluster.

Records whose token-encoded prompts share their first `prefix_min_tokens` tokens share a prefix (a system
prompt, a few-shot block, a document). They are one cluster (one `prefix_group`) only when that shared
prefix is at least `prefix_min_share` of their prompt tokens: L·m ≥ share·Σnᵢ for m records of nᵢ tokens
sharing their first L. A group below the share is refined: split by the token after the shared prefix,
and each part that shares enough of its own prompts is a cluster; the rest are clusters of one. Every
record of a group that is not one cluster keeps the group's name in the slice `shared_prefix`, so a
freeze can name it and a report can slice by it.

That is a declaration, frozen with the workload before any run (docs/gate.md, "What counts as a
cluster"): a short system prompt before distinct, longer requests is assumed to fail them one by one,
while a shared prefix that is most of each prompt (a document several questions read) is assumed to
fail them together.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from kvgate.workload.case import CaseDraft
from kvgate.workload.tokenizer import PromptTokenizer

SHARED_PREFIX = "shared_prefix"
"""Slice column naming a shared prefix that is not one cluster (its share is under `prefix_min_share`)."""


def check_min_share(value: Any) -> None:
    """`prefix_min_share` is a number in [0, 1]; a ValueError saying so otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"prefix_min_share must be a number in [0, 1] (0: any shared prefix), got {value!r}")


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def shared_length(prompts: Sequence[Sequence[int]]) -> int:
    """Tokens every prompt shares at its start: the common prefix of the least and greatest prompts."""
    as_tuples = [tuple(p) for p in prompts]
    return common_prefix(min(as_tuples), max(as_tuples))


def shared_share(prompts: Sequence[Sequence[int]]) -> float:
    """The shared prefix's share of the prompts' tokens: L·m / Σnᵢ."""
    total = sum(len(p) for p in prompts)
    return shared_length(prompts) * len(prompts) / total if total else 0.0


def _digest(prefix: tuple[int, ...]) -> str:
    return hashlib.sha256(json.dumps(prefix).encode()).hexdigest()[:12]


def clusters_of(prompts: dict[int, tuple[int, ...]], min_share: float) -> list[tuple[int, list[int]]]:
    """(shared length, members) of every cluster of two or more among `prompts` (index → token ids), all
    sharing a first token: a set whose shared prefix is at least `min_share` of its tokens is one
    cluster; any other is split by the token after its shared prefix (a prompt that ends there is alone)."""
    found: list[tuple[int, list[int]]] = []
    stack = [sorted(prompts)]
    while stack:
        members = stack.pop()
        if len(members) < 2:
            continue
        ids = [prompts[i] for i in members]
        shared = shared_length(ids)
        if shared * len(ids) >= min_share * sum(len(p) for p in ids):
            found.append((shared, members))
            continue
        parts: dict[int, list[int]] = defaultdict(list)
        for i in members:
            if len(prompts[i]) > shared:
                parts[prompts[i][shared]].append(i)
        stack.extend(parts.values())
    return sorted(found, key=lambda sm: sm[1][0])


def assign_prefix_groups(
    drafts: list[CaseDraft], tok: PromptTokenizer, min_tokens: int, label: str, *, min_share: float
) -> list[CaseDraft]:
    """Drafts whose encoded prompts share their first `min_tokens` tokens, and at least `min_share` of
    their tokens, get a common `prefix_group` ("{label}-{sha256 of the prefix, 12 hex}"); see the module
    docstring. A group of one is no group; a draft that already names its group keeps it."""
    if min_tokens <= 0:
        return drafts
    encoded: dict[tuple[int, ...], dict[int, tuple[int, ...]]] = defaultdict(dict)
    for i, draft in enumerate(drafts):
        if draft.prefix_group is None:
            ids = tuple(tok.encode_chat(draft.messages))
            if len(ids) >= min_tokens:
                encoded[ids[:min_tokens]][i] = ids
    out = list(drafts)
    for prefix, prompts in encoded.items():
        if len(prompts) < 2:
            continue
        name = f"{label}-{_digest(prefix)}"
        clusters = clusters_of(prompts, min_share)
        whole = len(clusters) == 1 and len(clusters[0][1]) == len(prompts)
        for shared, members in clusters:
            group = name if whole else f"{label}-{_digest(prompts[members[0]][:shared])}"
            for i in members:
                out[i] = replace(out[i], prefix_group=group)
        if not whole:
            for i in prompts:
                out[i] = replace(out[i], slices={**out[i].slices, SHARED_PREFIX: name})
    return out
