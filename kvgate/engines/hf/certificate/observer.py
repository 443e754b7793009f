"""The certificate of one case: samples what eviction drops, then certifies every decoding step.

`record_eviction` is called by the eviction hook for each layer, before the dropped entries leave the
cache. `observing(model, cache)` wraps the decoding loop: forward hooks read each layer's query projection
(output) and the attention output (the input of `o_proj`, [B, 1, Hq · D]) that the model computes anyway,
and `estimator.certify_step` turns them, with the retained keys and the sample, into an estimate and a
bound per head. The hooks only read: the model's outputs are the same with and without them. In replay,
the whole dropped set is kept as well and the exact error of every cell is computed beside the bound.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from kvgate.engines.hf.capture import apply_rope, attention_modules
from kvgate.engines.hf.certificate.estimator import certify_step, exact_error
from kvgate.engines.hf.certificate.sampling import (
    DroppedSample,
    attention_proxy,
    draw_sample,
    dropped_indices,
    expected_size,
    inclusion_probabilities,
)

MIN_SAMPLE = 16
"""Expected sample size per head at least this (or every dropped entry, when fewer)."""


@dataclass(frozen=True)
class CertificateSettings:
    """share: expected sample share of the dropped entries; floor: the least inclusion probability;
    confidence: of the upper bound; window: prompt queries whose attention sets π; seed: of the draws."""

    share: float = 0.1
    floor: float = 0.02
    confidence: float = 0.95
    window: int = 32
    seed: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class CertificateSummary:
    """Over decoding steps, layers and heads: the largest and the mean bound, the mean estimate, cells."""

    bound_max: float
    bound_mean: float
    estimate_mean: float
    cells: int


@dataclass
class Cells:
    """Replay records, one row per (step, layer): each [B, Hkv, G]."""

    estimate: list[torch.Tensor] = field(default_factory=list)
    bound: list[torch.Tensor] = field(default_factory=list)
    true: list[torch.Tensor] = field(default_factory=list)
    layer: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)


@dataclass
class DecodeCertificate:
    settings: CertificateSettings
    replay: bool = False
    samples: dict[int, DroppedSample] = field(default_factory=dict)
    dropped: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    bounds: list[torch.Tensor] = field(default_factory=list)
    estimates: list[torch.Tensor] = field(default_factory=list)
    cells: Cells = field(default_factory=Cells)

    def record_eviction(
        self, layer: int, keys: torch.Tensor, values: torch.Tensor, kept: torch.Tensor, queries: torch.Tensor
    ) -> None:
        """keys, values [B, Hkv, n, D] before eviction; kept [B, Hkv, k]; queries [B, Hq, n, D]."""
        n = keys.shape[2]
        if kept.shape[-1] >= n:
            return
        dropped = dropped_indices(kept, n)  # [B, Hkv, d]
        proxy = torch.gather(attention_proxy(queries, keys, self.settings.window), -1, dropped)
        size = expected_size(dropped.shape[-1], self.settings.share, MIN_SAMPLE)
        inclusion = inclusion_probabilities(proxy, size, self.settings.floor)
        self.samples[layer] = draw_sample(keys, values, dropped, inclusion, (*self.settings.seed, layer))
        if self.replay:
            index = dropped.unsqueeze(-1).expand(-1, -1, -1, keys.shape[-1])
            self.dropped[layer] = (torch.gather(keys, 2, index), torch.gather(values, 2, index))

    @contextlib.contextmanager
    def observing(self, model: Any, cache: Any) -> Iterator[None]:
        """Certify every forward pass run inside (the decoding steps); hooks are removed on exit."""
        modules = attention_modules(model)
        heads = int(model.config.num_attention_heads)
        state: dict[str, Any] = {"step": 0}
        projected: dict[int, torch.Tensor] = {}
        handles = []

        def position(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            state["rope"] = kwargs.get("position_embeddings", args[1] if len(args) > 1 else None)

        def query(index: int, _module: Any, _args: Any, out: torch.Tensor) -> None:
            projected[index] = out

        def attended(index: int, attn: Any, args: tuple[Any, ...]) -> None:
            sample = self.samples.get(index)
            if sample is not None:
                raw = projected.pop(index)
                self._certify(index, attn, heads, raw, state, cache.layers[index], args[0])
            if index == len(modules) - 1:
                state["step"] += 1

        try:
            handles.append(modules[0].register_forward_pre_hook(position, with_kwargs=True))
            for index, attn in enumerate(modules):
                handles.append(attn.q_proj.register_forward_hook(lambda m, a, o, i=index: query(i, m, a, o)))
                hook = lambda m, a, i=index, at=attn: attended(i, at, a)  # noqa: E731
                handles.append(attn.o_proj.register_forward_pre_hook(hook))
            yield
        finally:
            for handle in handles:
                handle.remove()

    def _certify(
        self,
        index: int,
        attn: Any,
        heads: int,
        projected: torch.Tensor,
        state: dict[str, Any],
        layer: Any,
        output: torch.Tensor,
    ) -> None:
        """One layer at one step: projected [B, 1, Hq · D] (q_proj's output), output [B, 1, Hq · D]."""
        b, m, _ = output.shape
        if m != 1:
            raise RuntimeError("the certificate observes one decoding step at a time")
        sample, keys, dim = self.samples[index], layer.keys, attn.head_dim
        hkv = keys.shape[1]
        raw = projected.view(b, 1, heads, dim)
        q_norm = getattr(attn, "q_norm", None)
        if q_norm is not None:
            raw = q_norm(raw)
        cos, sin = state["rope"]
        q = apply_rope(raw.transpose(1, 2), cos, sin).reshape(b, hkv, heads // hkv, dim)
        out = output.reshape(b, hkv, heads // hkv, dim)
        step = certify_step(q, out, keys, sample, float(attn.scaling), self.settings.confidence)
        self.bounds.append(step.bound)
        self.estimates.append(step.estimate)
        if self.replay:
            dropped_keys, dropped_values = self.dropped[index]
            true = exact_error(q, keys, layer.values, dropped_keys, dropped_values, float(attn.scaling))
            cells = self.cells
            cells.estimate.append(step.estimate)
            cells.bound.append(step.bound)
            cells.true.append(true)
            cells.layer.append(index)
            cells.step.append(int(state["step"]))

    def summary(self) -> CertificateSummary | None:
        """None when no decoding step was certified (the first token ended the output)."""
        if not self.bounds:
            return None
        bounds = torch.stack(self.bounds)
        return CertificateSummary(
            bound_max=float(bounds.max()),
            bound_mean=float(bounds.mean()),
            estimate_mean=float(torch.stack(self.estimates).mean()),
            cells=bounds.numel(),
        )
