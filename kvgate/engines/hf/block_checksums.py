"""Checksums of the KV cache per block of positions, to prove a round trip through a slower tier is exact.

A block is `block_size` consecutive cached positions of one layer's keys or values: the slice
[B, Hkv, block_size, D] of a [B, Hkv, n, D] tensor (the last block may be shorter). Its checksum is
SHA-256 over the slice's raw bytes, dtype and shape, so any flipped bit, reordering or change of
precision is caught. Comparing two sets of checksums names the first block that differs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class BlockId:
    """Where a block lives: layer index, "keys" or "values", and the positions [start, stop) it covers."""

    layer: int
    tensor: str
    start: int
    stop: int

    def __str__(self) -> str:
        return f"layer {self.layer} {self.tensor}, positions {self.start}–{self.stop - 1}"


def block_checksums(layers: list[tuple[torch.Tensor, torch.Tensor]], block_size: int) -> dict[BlockId, bytes]:
    """Checksum of every block of each layer's keys and values; layers[l] = (keys, values) [B, Hkv, n, D]."""
    if block_size < 1:
        raise ValueError(f"block_size must be ≥ 1, got {block_size}")
    sums: dict[BlockId, bytes] = {}
    for index, pair in enumerate(layers):
        for name, tensor in zip(("keys", "values"), pair, strict=True):
            for (start, stop), digest in _tensor_blocks(tensor, block_size):
                sums[BlockId(index, name, start, stop)] = digest
    return sums


def _tensor_blocks(tensor: torch.Tensor, block_size: int) -> list[tuple[tuple[int, int], bytes]]:
    """((start, stop), sha256) per block of positions of tensor [B, Hkv, n, D]."""
    b, heads, n, d = tensor.shape
    # One host copy laid out [B, n, Hkv, D]: a block of positions is then one contiguous run of bytes.
    host = tensor.detach().to("cpu").transpose(1, 2).contiguous()
    raw = host.view(torch.uint8).numpy() if host.numel() else np.zeros((b, n, heads, 0), dtype=np.uint8)
    header = f"{tensor.dtype}:{b}x{heads}x{{}}x{d}:"
    blocks = []
    for start in range(0, max(n, 1), block_size):
        stop = min(start + block_size, n)
        digest = hashlib.sha256(header.format(stop - start).encode())
        digest.update(np.ascontiguousarray(raw[:, start:stop]).data)
        blocks.append(((start, stop), digest.digest()))
    return blocks


def first_mismatch(expected: dict[BlockId, bytes], actual: dict[BlockId, bytes]) -> BlockId | None:
    """The first block (in layer, tensor, position order) whose checksum differs or is missing, or None."""
    for block in sorted(expected.keys() | actual.keys(), key=lambda b: (b.layer, b.tensor, b.start, b.stop)):
        if expected.get(block) != actual.get(block):
            return block
    return None
