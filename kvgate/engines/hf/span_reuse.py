"""Span reuse: position-independent caching of a case's context, computed alone and placed at any offset.

The family of EPIC (Hu et al., 2024, "EPIC: Efficient Position-Independent Context Caching for Serving
LLMs") and CacheBlend (Yao et al., 2024, "CacheBlend: Fast LLM Serving for RAG with Cached Knowledge
Fusion"): a span's KV is computed alone, at positions 0…len-1 with nothing before it, stored by its
content, and reused wherever the same tokens appear, its keys re-rotated to the new offset
(`rope_shift`). It is an approximation: the reused entries never attended to what precedes them at the
new offset (those papers recompute a few tokens to repair that; this arm does not), which is exactly
what the gate measures.

The rule, kept simple: a case's span is its context, the tokens from where the last message's content
begins to `question_start` (chat template header and system prompt stay before it; the question after
it). Spans shorter than `min_tokens` are not cached. On a miss the case is prefilled exactly as the
control, and its span's KV computed alone is stored; on a hit the tokens before the span are prefilled,
the stored span is appended with keys rotated by its offset, and the rest is prefilled against it. So a
later case whose context repeats an earlier one's (the same `prefix_group`, or the same document after
another preamble) reuses it, and `n_cached_tokens` counts exactly the approximated positions.

Stored spans: per layer (keys, values) [B, Hkv, len, D], keyed by sha256(namespace ‖ token ids), LRU by
bytes.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kvgate.engines.hf.forward import forward_at
from kvgate.engines.hf.rope_shift import rope_shift
from kvgate.workload.case import Case

LayerKV = tuple[torch.Tensor, torch.Tensor]


def span_key(namespace: str, token_ids: Sequence[int]) -> bytes:
    return hashlib.sha256(f"kvgate-span\0{namespace}\0".encode() + array("q", token_ids).tobytes()).digest()


class SpanStore:
    """Spans' KV computed alone, by (namespace, tokens); least recently used evicted beyond `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be ≥ 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._spans: OrderedDict[bytes, tuple[str, list[LayerKV], int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._spans)

    def get(self, namespace: str, token_ids: Sequence[int]) -> list[LayerKV] | None:
        key = span_key(namespace, token_ids)
        if key not in self._spans:
            return None
        self._spans.move_to_end(key)
        return self._spans[key][1]

    def put(self, namespace: str, token_ids: Sequence[int], layers: list[LayerKV]) -> None:
        key = span_key(namespace, token_ids)
        if key in self._spans:
            self.nbytes -= self._spans.pop(key)[2]
        nbytes = sum(k.nbytes + v.nbytes for k, v in layers)
        self._spans[key] = (namespace, layers, nbytes)
        self.nbytes += nbytes
        while self.nbytes > self.max_bytes and self._spans:
            self.nbytes -= self._spans.popitem(last=False)[1][2]

    def drop_namespace(self, namespace: str) -> None:
        for key in [k for k, entry in self._spans.items() if entry[0] == namespace]:
            self.nbytes -= self._spans.pop(key)[2]


def context_span(tokenizer: Any, case: Case) -> tuple[int, int]:
    """Token range [start, question_start) of the case's context (see the module's rule).

    Needs a fast tokenizer (offsets) and a workload frozen for it: the rendered chat must re-tokenize to
    the case's prompt_token_ids, or the range could not be trusted.
    """
    if case.question_start is None or case.prompt_token_ids is None:
        raise ValueError("span reuse needs the case's question_start; freeze the workload with --model")
    text = str(tokenizer.apply_chat_template(list(case.messages), tokenize=False, add_generation_prompt=True))
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    if tuple(encoded["input_ids"]) != tuple(case.prompt_token_ids):
        raise ValueError("span reuse needs a workload frozen for this model's tokenizer")
    at = text.rfind(case.messages[-1]["content"])
    if at < 0:
        raise ValueError("span reuse cannot find the last message's content in the rendered prompt")
    start = next(
        (i for i, (first, _) in enumerate(encoded["offset_mapping"]) if first >= at), case.question_start
    )
    return min(start, case.question_start), case.question_start


@dataclass
class SpanReuse:
    """A session's span reuse: prefill a case, reusing its context's KV computed alone when stored."""

    model: Any
    tokenizer: Any
    rotary: Any
    store: SpanStore
    namespace: str
    min_tokens: int

    def prefill(
        self, case: Case, ids: torch.Tensor, cache: Any, until: int
    ) -> tuple[torch.Tensor | None, int]:
        """Prefill positions [0, until) of ids [1, n] into the empty `cache`: (last logits, tokens reused).

        `until` is the prompt's length, or `question_start` when eviction compresses the context alone.
        Logits are None only when the reused span ends at `until` (the caller then prefills the rest).
        """
        start, stop = context_span(self.tokenizer, case)
        tokens = list(ids[0, start:stop].tolist())
        if stop - start < self.min_tokens or stop > until:
            return forward_at(self.model, ids[:, :until], cache, 0), 0
        stored = self.store.get(self.namespace, tokens)
        if stored is None:
            logits = forward_at(self.model, ids[:, :until], cache, 0)
            self.store.put(self.namespace, tokens, self._alone(ids[:, start:stop]))
            return logits, 0
        if start > 0:
            forward_at(self.model, ids[:, :start], cache, 0)
        for index, (keys, values) in enumerate(stored):
            cache.update(rope_shift(keys, start, self.rotary), values, index)
        rest = forward_at(self.model, ids[:, stop:until], cache, stop) if stop < until else None
        return rest, stop - start

    def _alone(self, span_ids: torch.Tensor) -> list[LayerKV]:
        """KV of span_ids [1, len] computed with nothing before it, at positions 0…len-1."""
        from transformers import DynamicCache

        alone: Any = DynamicCache(config=self.model.config)
        forward_at(self.model, span_ids, alone, 0)
        return [(layer.keys, layer.values) for layer in alone.layers]
