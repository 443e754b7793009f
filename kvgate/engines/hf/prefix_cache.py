"""Prefix reuse: a cache of KV blocks keyed by chained block hashes, bounded by bytes with LRU eviction.

As in vLLM's automatic prefix caching: a prompt is cut into full blocks of `block_size` tokens; block i's
key is sha256(key of block i-1 ‖ the block's token ids), and block 0 chains from the namespace and the
block size, so a key names the whole prefix up to its block and two namespaces (two arms, two
replicates) never share an entry. A lookup walks the prompt's keys until the first miss: hits are
block-aligned. An earlier case warms every later one that shares a prefix with it (cases of one
`prefix_group` share theirs by construction).

An entry holds one block's KV for every layer: keys and values [B, Hkv, block_size, D] (keys rotated at
their true positions, which a prefix keeps). Entries are evicted least recently used first once
`max_bytes` is exceeded; within a prefix the tail is evicted before the head, so an eviction shortens
cached prefixes rather than orphaning their tails.
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
from kvgate.workload.case import Case

LayerKV = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Block:
    namespace: str
    layers: tuple[LayerKV, ...]
    nbytes: int


def block_keys(namespace: str, token_ids: Sequence[int], block_size: int) -> list[bytes]:
    """Chained sha256 keys of the full blocks of `token_ids` (a trailing partial block has none)."""
    if block_size < 1:
        raise ValueError(f"block_size must be ≥ 1, got {block_size}")
    parent = hashlib.sha256(f"kvgate-prefix\0{namespace}\0{block_size}".encode()).digest()
    keys = []
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hashlib.sha256(parent + array("q", token_ids[start : start + block_size]).tobytes()).digest()
        keys.append(parent)
    return keys


class PrefixCache:
    """Blocks of KV by chained key, shared by an engine's sessions and separated by namespace."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be ≥ 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._blocks: OrderedDict[bytes, Block] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def lookup(self, namespace: str, token_ids: Sequence[int], block_size: int) -> list[Block]:
        """The cached blocks of the longest block-aligned prefix of `token_ids`, in order."""
        hits = []
        for key in block_keys(namespace, token_ids, block_size):
            block = self._blocks.get(key)
            if block is None:
                break
            hits.append((key, block))
        self._touch([key for key, _ in hits])
        return [block for _, block in hits]

    def insert(
        self, namespace: str, token_ids: Sequence[int], block_size: int, layers: Sequence[LayerKV]
    ) -> None:
        """Cache the full blocks of `token_ids`, whose KV is `layers[l]` = (keys, values) [B, Hkv, ≥n, D].

        Blocks already cached are only touched; new ones are copied out of `layers`.
        """
        keys = block_keys(namespace, token_ids, block_size)
        for index, key in enumerate(keys):
            if key in self._blocks:
                continue
            start, stop = index * block_size, (index + 1) * block_size
            kv = tuple((k[:, :, start:stop].clone(), v[:, :, start:stop].clone()) for k, v in layers)
            nbytes = sum(k.nbytes + v.nbytes for k, v in kv)
            self._blocks[key] = Block(namespace, kv, nbytes)
            self.nbytes += nbytes
        self._touch(keys)
        self._evict()

    def drop_namespace(self, namespace: str) -> None:
        """Forget every block of `namespace` (its session closed)."""
        for key in [k for k, b in self._blocks.items() if b.namespace == namespace]:
            self.nbytes -= self._blocks.pop(key).nbytes

    def _touch(self, keys: list[bytes]) -> None:
        # Tail first, so the head of a prefix is the most recently used and is evicted last.
        for key in reversed(keys):
            self._blocks.move_to_end(key)

    def _evict(self) -> None:
        while self.nbytes > self.max_bytes and self._blocks:
            _, block = self._blocks.popitem(last=False)
            self.nbytes -= block.nbytes


@dataclass
class PrefixReuse:
    """A session's use of the engine's prefix cache: seed a case from it, prefill the rest, fill it."""

    model: Any
    store: PrefixCache
    namespace: str
    block_size: int

    def prefill(
        self, case: Case, ids: torch.Tensor, cache: Any, until: int
    ) -> tuple[torch.Tensor | None, int]:
        """Prefill positions [0, until) of ids [1, n] into the empty `cache`: (last logits, tokens reused).

        At most min(until, n - 1) tokens are reused: the last prompt token is always computed, for its
        logits. The blocks of [0, until) are cached before any hook changes them. Logits are None only
        when every position up to `until` was reused (then until < n and the caller prefills the rest).
        """
        tokens = list(ids[0].tolist())
        limit = min(until, len(tokens) - 1)
        blocks = self.store.lookup(self.namespace, tokens[:limit], self.block_size)
        reused = len(blocks) * self.block_size
        if blocks:
            for index in range(len(blocks[0].layers)):
                keys = torch.cat([b.layers[index][0] for b in blocks], dim=2)
                values = torch.cat([b.layers[index][1] for b in blocks], dim=2)
                cache.update(keys, values, index)
        logits = forward_at(self.model, ids[:, reused:until], cache, reused) if reused < until else None
        layers = [(layer.keys, layer.values) for layer in cache.layers]
        self.store.insert(self.namespace, tokens[:until], self.block_size, layers)
        return logits, reused
