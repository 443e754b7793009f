"""Budgets that differ by head or layer, held in a cache whose layers and heads all have one length.

transformers' cache is dense: every head of a layer holds as many entries as the others, and the
attention mask is built once for all layers. A budgeted eviction (`budgets`) therefore keeps the same
number m of entries in every head and layer (the most any keeps) and marks, per layer, the ones beyond
a head's own budget absent: present[layer] is [B, Hkv, m], True for an entry its head keeps. While the
`HeadMask` is installed, a forward pre-hook on each attention module turns its attention mask into a
per-head one [B, Hq, q, K] that also hides the absent entries (query head h reads key head h // G);
entries appended later are present in every head. The outputs are those of a cache that held only the
present entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class HeadMask:
    """The present entries of each layer's compressed span (empty: no head hides anything)."""

    present: dict[int, torch.Tensor] = field(default_factory=dict)
    handles: list[Any] = field(default_factory=list)

    def install(self, modules: list[Any]) -> None:
        """Hook every attention module (`capture.attention_modules`), once."""
        if not self.handles:
            self.handles = [m.register_forward_pre_hook(self._hook, with_kwargs=True) for m in modules]

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def absent(self) -> float:
        """Entries absent per head, averaged over layers, heads and rows (0 when none is)."""
        if not self.present:
            return 0.0
        return float(torch.stack([(~p).float().sum(dim=-1).mean() for p in self.present.values()]).mean())

    def _hook(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        present = self.present.get(int(module.layer_idx))
        if present is None:
            return args, kwargs
        hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        cache = kwargs.get("past_key_values")
        if cache is None:
            raise RuntimeError("a budgeted eviction's attention needs the cache (past_key_values)")
        q = int(hidden.shape[1])
        total = int(cache.layers[int(module.layer_idx)].keys.shape[2]) + q
        given = kwargs.get("attention_mask")
        kwargs["attention_mask"] = head_mask(given, present, q, total, module, hidden.dtype)
        return args, kwargs


def head_mask(
    mask: torch.Tensor | None, present: torch.Tensor, q: int, total: int, module: Any, dtype: torch.dtype
) -> torch.Tensor:
    """The additive mask [B, Hq, q, total] (0 seen, the dtype's min hidden): the given mask (bool, or
    additive, [B, 1, q, ≥ total]; None: causal) with present [B, Hkv, m] hiding each head's absent
    entries among the first m positions."""
    b, hkv, m = present.shape
    device = present.device
    if mask is None:
        rows = torch.arange(q, device=device).unsqueeze(1) + (total - q)
        seen = (torch.arange(total, device=device).unsqueeze(0) <= rows).expand(b, 1, q, total)
    elif mask.dtype == torch.bool:
        seen = mask[..., :total]
    else:
        seen = mask[..., :total] == 0
    full = torch.ones(b, hkv, total, dtype=torch.bool, device=device)
    full[:, :, :m] = present
    group = int(module.config.num_attention_heads) // hkv
    per_query_head = full.repeat_interleave(group, dim=1).unsqueeze(2)  # [B, Hq, 1, total]
    allowed = seen & per_query_head
    zero = torch.zeros((), dtype=dtype, device=device)
    return torch.where(allowed, zero, torch.finfo(dtype).min)
