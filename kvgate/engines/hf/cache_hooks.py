"""What an arm does to the transformers KV cache, as hooks around prefill and each appended entry.

The cache is a `DynamicCache`; layer l holds `layers[l].keys` and `.values`, each [B, Hkv, n, D], keys
already rotated. Hooks run in the order of the treatment's parts (eviction before quantisation for
D = B + C), so a composite applies exactly what its parts would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from kvgate.engines.hf.eviction.base import EvictionMethod, ScoringInputs, gather_kept, keep_indices, n_keep
from kvgate.treatments.eviction_methods import EVICTION_METHODS
from kvgate.treatments.spec import Eviction, Quantize, Treatment


class CacheHook(Protocol):
    def after_prefill(self, cache: Any, queries: dict[int, torch.Tensor] | None) -> None:
        """Called once the span to compress (the prompt, or the context before the question) is cached."""
        ...

    def after_append(self, cache: Any, n_new: int) -> None:
        """Called after `n_new` entries were appended to every layer (question prefill or a decode step)."""
        ...


@dataclass
class EvictHook:
    """Keep the top-scoring entries of the cached span per layer and head (kept entries keep positions).

    A method with `head_counts` (AdaKV, PyramidKV: eviction/budgets.py) keeps a number per layer and head;
    every head then holds the most any keeps, its surplus marked absent in `head_mask` (head_mask.py).
    """

    method: EvictionMethod
    convention: str = "kvgate"
    """treatments.spec.CONVENTIONS: how many entries are kept and which of tied scores win."""
    certificate: Any = None
    """A certificate.observer.DecodeCertificate shown every layer's eviction, or None."""
    head_mask: Any = None
    """The session's eviction.head_mask.HeadMask, filled by a budgeted method."""

    def after_prefill(self, cache: Any, queries: dict[int, torch.Tensor] | None) -> None:
        scored = [self._scores(index, layer, queries) for index, layer in enumerate(cache.layers)]
        counts_of = getattr(self.method, "head_counts", None)
        keep = n_keep(int(cache.layers[0].keys.shape[2]), self.method.ratio, self.convention)
        counts = []
        if counts_of is not None:
            counts = [counts_of(s, keep, i, len(scored), self.convention) for i, s in enumerate(scored)]
        width = max((int(c.max()) for c in counts), default=keep)
        for index, (layer, scores) in enumerate(zip(cache.layers, scored, strict=True)):
            kept = keep_indices(scores, width, self.convention)
            if counts:
                from kvgate.engines.hf.eviction.budgets import ranks

                rank = ranks(scores.gather(-1, kept), self.convention)
                self.head_mask.present[index] = rank < counts[index].unsqueeze(-1)
            if self.certificate is not None:
                layer_queries = queries[index] if queries is not None else layer.keys[:, :0]
                self.certificate.record_eviction(index, layer.keys, layer.values, kept, layer_queries)
            layer.keys = gather_kept(layer.keys, kept)
            layer.values = gather_kept(layer.values, kept)

    def _scores(self, index: int, layer: Any, queries: dict[int, torch.Tensor] | None) -> torch.Tensor:
        """[B, Hkv, n]: row by row, so a batch scores each case as it would be scored alone."""
        layer_queries = queries[index] if queries is not None else layer.keys[:, :0]
        rows = [
            ScoringInputs(layer.keys[r : r + 1], layer.values[r : r + 1], layer_queries[r : r + 1], index)
            for r in range(layer.keys.shape[0])
        ]
        return torch.cat([self.method.scores(row) for row in rows])

    def after_append(self, cache: Any, n_new: int) -> None:
        return None


@dataclass
class QuantizeHook:
    """Store K and V in the treatment's KV format (kv_formats): quantise the whole cache after prefill,
    then each appended entry.

    FP8 tensor and head scales and NVFP4's tensor scale are fixed at prefill (as a static KV scale is)
    and appended entries saturate to them; per-token, per-token-head and GGML block scales are computed
    per entry. In a batch each row (case) gets its own scales, as it would alone: the scales are
    [B, ·, ·, ·], one row per case. `quantized` counts the cache positions it quantised (every layer's K
    and V at each, every row alike), the arm's proof that the format was applied.
    """

    treatment: Quantize
    scales: dict[tuple[int, str], torch.Tensor] = field(default_factory=dict)
    quantized: int = 0

    def dtype_of(self, name: str) -> str:
        """The dtype of "keys" (the treatment's dtype) or "values" (its dtype_v when given)."""
        return self.treatment.dtype if name == "keys" else self.treatment.value_dtype

    def after_prefill(self, cache: Any, queries: dict[int, torch.Tensor] | None) -> None:
        from kvgate.engines.hf.kv_formats.formats import simulate

        self.quantized += int(cache.layers[0].keys.shape[2])
        for index, layer in enumerate(cache.layers):
            for name in ("keys", "values"):
                tensor = getattr(layer, name)
                rows = [
                    simulate(tensor[r : r + 1], self.dtype_of(name), self.treatment.scale)
                    for r in range(tensor.shape[0])
                ]
                setattr(layer, name, torch.cat([q for q, _ in rows]))
                states = [state for _, state in rows if state is not None]
                if len(states) == len(rows):
                    self.scales[index, name[0]] = torch.cat(states)

    def after_append(self, cache: Any, n_new: int) -> None:
        from kvgate.engines.hf.kv_formats.formats import simulate

        self.quantized += n_new
        for index, layer in enumerate(cache.layers):
            for name in ("keys", "values"):
                tensor = getattr(layer, name)
                fixed = self.scales.get((index, name[0]))
                new, _ = simulate(tensor[:, :, -n_new:], self.dtype_of(name), self.treatment.scale, fixed)
                tensor[:, :, -n_new:] = new


def build_hooks(treatment: Treatment) -> list[CacheHook]:
    """The hooks for `treatment`'s parts, in order. Offload and reuse are handled by the session."""
    hooks: list[CacheHook] = []
    for part in treatment.parts():
        if isinstance(part, Eviction):
            from kvgate.engines.hf.eviction.methods import make_method

            hooks.append(EvictHook(make_method(part), part.convention))
        elif isinstance(part, Quantize):
            hooks.append(QuantizeHook(part))
    return hooks


def query_window(treatment: Treatment, certificate_window: int | None = None) -> int | None:
    """How many of the prompt's last queries to capture: the most any query-aware method reads (its
    `query_window`) or the certificate reads (its window); None: all of them (H2O sums over every query)."""
    from kvgate.engines.hf.eviction.methods import make_method

    windows = [certificate_window] if certificate_window is not None else []
    for part in treatment.parts():
        if isinstance(part, Eviction) and EVICTION_METHODS[part.method].needs_queries:
            window = getattr(make_method(part), "query_window", None)
            if window is None:
                return None
            windows.append(int(window))
    return max(windows) if windows else None


def needs_queries(treatment: Treatment) -> bool:
    """Whether an eviction among `treatment`'s parts scores with the prompt's queries."""
    return any(
        isinstance(p, Eviction) and EVICTION_METHODS[p.method].needs_queries for p in treatment.parts()
    )
