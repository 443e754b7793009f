"""KV offload: move the whole cache to a slower tier after prefill and bring it back before decoding.

This is what an offloading server does when a request's KV leaves the accelerator between steps (vLLM's
CPU offloading connector, LMCache's host and disk backends): the bytes must come back exactly, so a
correct offload never changes an output. Each block of `block_size` positions per layer and tensor is
checksummed before the move and verified after (`block_checksums`); a block that comes back different
raises `OffloadCorrupted`, which fails the case as an engine error: corrupted KV is never used.

Tiers hold a list of per-layer (keys, values), each [B, Hkv, n, D]:
- `HostTier`: a separate host copy (pinned memory when the cache lives on a GPU);
- `DiskTier`: raw bytes in a file under the session's own directory; nothing stays in memory.
`corrupt()` flips one bit of the stored copy: a planted fault, to prove the checksums catch it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any, Protocol

import torch

from kvgate.engines.hf.block_checksums import block_checksums, first_mismatch

LayerKV = tuple[torch.Tensor, torch.Tensor]


class OffloadCorrupted(RuntimeError):
    """A block of offloaded KV came back different from what was sent."""


class Tier(Protocol):
    name: str

    def store(self, layers: list[LayerKV]) -> None:
        """Take a copy of `layers`; the caller then drops its own tensors."""
        ...

    def load(self, device: torch.device) -> list[LayerKV]:
        """Give the stored layers back on `device` and forget them."""
        ...

    def corrupt(self) -> None:
        """Flip one bit of the stored copy (a planted fault for tests)."""
        ...


@dataclass
class HostTier:
    """A host-memory copy of the cache: pinned when the cache is on a GPU, a plain clone on CPU."""

    name: str = "host"
    held: list[LayerKV] = field(default_factory=list)

    def store(self, layers: list[LayerKV]) -> None:
        self.held = [(_to_host(k), _to_host(v)) for k, v in layers]
        if any(k.is_cuda for k, _ in layers):
            torch.cuda.synchronize()

    def load(self, device: torch.device) -> list[LayerKV]:
        held, self.held = self.held, []
        return [(k.to(device, non_blocking=True), v.to(device, non_blocking=True)) for k, v in held]

    def corrupt(self) -> None:
        _flip_first_bit(self.held[0][0])


@dataclass
class _Slot:
    offset: int
    nbytes: int
    dtype: torch.dtype
    shape: tuple[int, ...]


@dataclass
class DiskTier:
    """One file per offload under `directory` (the session's own), raw bytes per layer's keys then values."""

    directory: Path
    name: str = "disk"
    path: Path | None = None
    slots: list[tuple[_Slot, _Slot]] = field(default_factory=list)
    _serial: Any = field(default_factory=count)

    def store(self, layers: list[LayerKV]) -> None:
        self.path = self.directory / f"kv-{next(self._serial):06d}.bin"
        self.slots, offset = [], 0
        with self.path.open("wb") as out:
            for pair in layers:
                slots = []
                for tensor in pair:
                    raw = tensor.detach().to("cpu").contiguous().view(torch.uint8).numpy()
                    out.write(raw.data)
                    slots.append(_Slot(offset, raw.nbytes, tensor.dtype, tuple(tensor.shape)))
                    offset += raw.nbytes
                self.slots.append((slots[0], slots[1]))

    def load(self, device: torch.device) -> list[LayerKV]:
        if self.path is None:
            raise RuntimeError("offload (disk tier): nothing was stored")
        buffer = bytearray(self.path.read_bytes())
        self.path.unlink()
        self.path = None
        return [(_from_bytes(buffer, k, device), _from_bytes(buffer, v, device)) for k, v in self.slots]

    def corrupt(self) -> None:
        assert self.path is not None
        with self.path.open("r+b") as file:
            file.seek(self.slots[0][0].offset)
            byte = file.read(1)[0]
            file.seek(self.slots[0][0].offset)
            file.write(bytes([byte ^ 1]))


def round_trip(cache: Any, tier: Tier, block_size: int, plant_corruption: bool = False) -> tuple[int, int]:
    """Offload every layer of `cache` (a DynamicCache) to `tier` and back, verifying each block's checksum.

    Returns (blocks written to the tier, blocks read back and verified): the arm's proof of offload.
    Raises OffloadCorrupted naming the first block that differs; the cache is then unusable.
    """
    layers: list[LayerKV] = [(layer.keys, layer.values) for layer in cache.layers]
    device = layers[0][0].device
    sent = block_checksums(layers, block_size)
    tier.store(layers)
    del layers
    for layer in cache.layers:  # drop the device copy: the tier now holds the only one
        layer.keys = layer.values = None
    if plant_corruption:
        tier.corrupt()
    restored = tier.load(device)
    back = block_checksums(restored, block_size)
    bad = first_mismatch(sent, back)
    if bad is not None:
        raise OffloadCorrupted(
            f"offload to the {tier.name} tier: block at {bad} came back different (checksum mismatch)"
        )
    for layer, (keys, values) in zip(cache.layers, restored, strict=True):
        layer.keys, layer.values = keys, values
    return len(sent), len(back)


def _to_host(tensor: torch.Tensor) -> torch.Tensor:
    host = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu", pin_memory=tensor.is_cuda)
    host.copy_(tensor, non_blocking=tensor.is_cuda)
    return host


def _from_bytes(buffer: bytearray, slot: _Slot, device: torch.device) -> torch.Tensor:
    raw = torch.frombuffer(buffer, dtype=torch.uint8, count=slot.nbytes, offset=slot.offset).clone()
    return raw.view(slot.dtype).reshape(slot.shape).to(device)


def _flip_first_bit(tensor: torch.Tensor) -> None:
    raw = tensor.view(torch.uint8).view(-1)
    raw[0] = raw[0] ^ 1
