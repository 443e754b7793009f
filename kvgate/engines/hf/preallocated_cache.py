"""A KV cache whose layers are allocated once per case and written in place, never copied per step.

transformers' `DynamicLayer` appends with `torch.cat`, copying the whole cache on every decode step
(13% of a step at 507 tokens here, more as the cache grows). A `PreallocatedLayer` holds keys and values
in buffers [B, Hkv, capacity, D] sized for the prompt plus max_new_tokens; `keys` and `values` are views
[B, Hkv, n, D] of the filled part, so the attention reads exactly the entries it would read from the
dynamic cache. An append writes its entries after the filled part; assigning `keys` or `values` (a hook
that evicts, quantises or restores an offloaded cache) copies the new entries to the buffer's front.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache, DynamicLayer


class _Buffer:
    """One of a layer's two tensors: storage [B, H, capacity, D] and how many positions are filled."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.storage: torch.Tensor | None = None
        self.length = 0

    def view(self) -> torch.Tensor | None:
        return None if self.storage is None else self.storage[:, :, : self.length]

    def _room(self, like: torch.Tensor, length: int) -> torch.Tensor:
        """Storage laid out for `like` with room for `length` positions, reallocated only when it has
        not (the filled part kept when the layout is the same)."""
        b, h, _, d = like.shape
        storage = self.storage
        same = (
            storage is not None
            and (storage.shape[0], storage.shape[1], storage.shape[3]) == (b, h, d)
            and storage.dtype == like.dtype
            and storage.device == like.device
        )
        if storage is not None and same and storage.shape[2] >= length:
            return storage
        grown = torch.empty((b, h, max(self.capacity, length), d), dtype=like.dtype, device=like.device)
        if storage is not None and same:
            grown[:, :, : self.length] = storage[:, :, : self.length]
        self.storage = grown
        return grown

    def assign(self, value: torch.Tensor | None) -> None:
        """Make `value` [B, H, n, D] the filled part (None: drop the storage)."""
        if value is None:
            self.storage, self.length = None, 0
            return
        if value.dim() != 4 or value.shape[2] == 0:
            self.length = 0
            return
        storage = self.storage
        where = (value.data_ptr(), value.stride())
        if storage is not None and where == (storage.data_ptr(), storage.stride()):
            self.length = value.shape[2]  # a prefix view of the storage (a crop): nothing to copy
            return
        if storage is not None and value.untyped_storage().data_ptr() == storage.untyped_storage().data_ptr():
            value = value.clone()  # another view of the same storage: copy it out before overwriting
        self.length = 0
        self._room(value, value.shape[2])[:, :, : value.shape[2]] = value
        self.length = value.shape[2]

    def append(self, value: torch.Tensor) -> torch.Tensor:
        """Write `value` [B, H, m, D] after the filled part; the new filled view."""
        end = self.length + value.shape[2]
        storage = self._room(value, end)
        storage[:, :, self.length : end] = value
        self.length = end
        return storage[:, :, :end]


class PreallocatedLayer(DynamicLayer):
    """A `DynamicLayer` whose keys and values live in buffers allocated for `capacity` positions."""

    def __init__(self, capacity: int) -> None:
        self._k, self._v = _Buffer(capacity), _Buffer(capacity)
        super().__init__()

    @property
    def keys(self) -> torch.Tensor | None:
        return self._k.view()

    @keys.setter
    def keys(self, value: torch.Tensor | None) -> None:
        self._k.assign(value)

    @property
    def values(self) -> torch.Tensor | None:
        return self._v.view()

    @values.setter
    def values(self, value: torch.Tensor | None) -> None:
        self._v.assign(value)

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        self.is_initialized = True

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        return self._k.append(key_states), self._v.append(value_states)


def preallocated_cache(config: Any, capacity: int) -> DynamicCache:
    """A DynamicCache for `config` whose full-attention layers are PreallocatedLayers of `capacity`
    positions (other layer kinds, such as sliding windows, stay as transformers makes them)."""
    cache = DynamicCache(config=config)
    cache.layers = [
        PreallocatedLayer(capacity) if type(layer) is DynamicLayer else layer for layer in cache.layers
    ]
    return cache
