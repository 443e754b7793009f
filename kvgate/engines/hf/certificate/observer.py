"""The certificate of one case: samples what eviction drops, then certifies every decoding step.

`record_eviction` is called by the eviction hook for each layer, before the dropped entries leave the
cache. `observing(model, cache)` wraps the decoding loop: forward hooks read each layer's query projection
(output) and the attention output (the input of `o_proj`, [B, 1, Hq · D]) that the model computes anyway;
after the last layer, `estimator.certify_with_lse` turns them, with the retained keys and the samples of
every layer, into an estimate and a bound per layer and head. The hooks only read: the model's outputs are
the same with and without them. In replay, the whole dropped set is kept as well and the exact error of
every cell is computed beside the bound; with `draws` > 1, that many independent samples (the first the
arm's own) each bound every cell, and each cell counts the draws that cover its true error: the chance,
for that cell, that the certificate covers (the decode does not depend on the sample, so one decode
serves every draw).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from kvgate.engines.hf.capture import apply_rope, attention_modules
from kvgate.engines.hf.certificate.estimator import (
    StepCertificate,
    certify_with_lse,
    exact_error,
    retained_lse,
)
from kvgate.engines.hf.certificate.sampling import (
    DroppedSample,
    attention_proxy,
    draw_sample,
    dropped_indices,
    expected_size,
    inclusion_probabilities,
    stack_samples,
)

MIN_SAMPLE = 16
"""Expected sample size per head at least this (or every dropped entry, when fewer)."""
TOLERANCE = 1e-6
"""A cell is covered when its true error is at most the bound plus this (the float32 rounding of the
model's attention)."""


@dataclass(frozen=True)
class CertificateSettings:
    """share: expected sample share of the dropped entries; floor: the least inclusion probability;
    confidence: of the upper bound; window: prompt queries whose attention sets π; seed: of the draws."""

    share: float = 0.1
    floor: float = 0.02
    confidence: float = 0.95
    window: int = 32
    seed: tuple[int, ...] = (0,)


RELATIVE_FLOOR = 1e-6
"""‖o_R‖ below this counts as this when bound and estimate are read relative to it."""


@dataclass(frozen=True)
class CertificateSummary:
    """Over decoding steps, layers and heads (cells): the largest and the mean bound, the mean estimate;
    the mean bound and estimate relative to ‖o_R‖ (how far attention moved, in units of the output it
    moved); the share of cells whose bound is the deterministic cap; the number of cells."""

    bound_max: float
    bound_mean: float
    estimate_mean: float
    relative_bound_mean: float
    relative_estimate_mean: float
    cap_share: float
    cells: int


@dataclass
class Cells:
    """Replay records, one row per (step, layer): each [B, Hkv, G]."""

    estimate: list[torch.Tensor] = field(default_factory=list)
    corrected: list[torch.Tensor] = field(default_factory=list)
    bound: list[torch.Tensor] = field(default_factory=list)
    output_norm: list[torch.Tensor] = field(default_factory=list)
    capped: list[torch.Tensor] = field(default_factory=list)
    true: list[torch.Tensor] = field(default_factory=list)
    covering_draws: list[torch.Tensor] = field(default_factory=list)
    """Of the replay's draws, how many bound the cell at or above its true error (int64)."""
    layer: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)


@dataclass
class DecodeCertificate:
    settings: CertificateSettings
    replay: bool = False
    draws: int = 1
    """In replay: independent samples drawn of every layer's dropped set, the first the arm's own."""
    samples: dict[int, DroppedSample] = field(default_factory=dict)
    stacked: DroppedSample | None = None
    extra_samples: dict[int, list[DroppedSample]] = field(default_factory=dict)
    extra_stacked: list[DroppedSample] = field(default_factory=list)
    dropped: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    bounds: list[torch.Tensor] = field(default_factory=list)
    estimates: list[torch.Tensor] = field(default_factory=list)
    output_norms: list[torch.Tensor] = field(default_factory=list)
    capped: list[torch.Tensor] = field(default_factory=list)
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
            own = self.samples[layer]
            self.extra_samples[layer] = [
                _sharing_dropped(
                    draw_sample(keys, values, dropped, inclusion, (*self.settings.seed, layer, draw)), own
                )
                for draw in range(1, self.draws)
            ]

    @contextlib.contextmanager
    def observing(self, model: Any, cache: Any) -> Iterator[None]:
        """Certify every forward pass run inside (the decoding steps); hooks are removed on exit.

        Each layer's hooks only keep references; once the last layer's attention has run, the step is
        certified for every layer at once (one batched computation, `certify_with_lse`)."""
        modules = attention_modules(model)
        last = len(modules) - 1
        state: dict[str, Any] = {"step": 0}
        projected: dict[int, torch.Tensor] = {}
        outputs: dict[int, torch.Tensor] = {}
        handles = []

        def position(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            state["rope"] = kwargs.get("position_embeddings", args[1] if len(args) > 1 else None)

        def query(index: int, out: torch.Tensor) -> None:
            projected[index] = out

        def attended(index: int, args: tuple[Any, ...]) -> None:
            outputs[index] = args[0]
            if index == last:
                if len(self.samples) == len(modules):
                    self._certify(modules, model, cache, projected, outputs, state)
                projected.clear()
                outputs.clear()
                state["step"] += 1

        try:
            handles.append(modules[0].register_forward_pre_hook(position, with_kwargs=True))
            for index, attn in enumerate(modules):
                handles.append(attn.q_proj.register_forward_hook(lambda m, a, o, i=index: query(i, o)))
                handles.append(attn.o_proj.register_forward_pre_hook(lambda m, a, i=index: attended(i, a)))
            yield
        finally:
            for handle in handles:
                handle.remove()

    def _certify(
        self,
        modules: list[Any],
        model: Any,
        cache: Any,
        projected: dict[int, torch.Tensor],
        outputs: dict[int, torch.Tensor],
        state: dict[str, Any],
    ) -> None:
        """One decoding step, every layer: projected and outputs {layer: [B, 1, Hq · D]} (q_proj's output
        and the attention output) → estimate and bound [L, B, Hkv, G]."""
        b, m, _ = outputs[0].shape
        if m != 1:
            raise RuntimeError("the certificate observes one decoding step at a time")
        heads, dim = int(model.config.num_attention_heads), int(modules[0].head_dim)
        hkv = int(cache.layers[0].keys.shape[1])
        shape = (len(modules), b, hkv, heads // hkv, dim)
        raw = torch.stack([projected[i] for i in range(len(modules))]).view(len(modules) * b, 1, heads, dim)
        norms = [getattr(attn, "q_norm", None) for attn in modules]
        if any(n is not None for n in norms):
            raw = torch.cat([norm(r) if norm else r for norm, r in zip(norms, raw.split(b), strict=True)])
        cos, sin = state["rope"]
        q = apply_rope(raw.transpose(1, 2), cos.repeat(len(modules), 1, 1), sin.repeat(len(modules), 1, 1))
        q = q.reshape(shape)
        out = torch.stack([outputs[i] for i in range(len(modules))]).reshape(shape)
        scale = float(modules[0].scaling)
        lse = torch.stack([retained_lse(q[i], cache.layers[i].keys, scale) for i in range(len(modules))])
        if self.stacked is None:
            self.stacked = stack_samples([self.samples[i] for i in range(len(modules))])
        step = certify_with_lse(q, out, lse, self.stacked, scale, self.settings.confidence)
        self.bounds.append(step.bound)
        self.estimates.append(step.estimate)
        self.output_norms.append(step.output_norm)
        self.capped.append(step.capped)
        if self.replay:
            self._replay(modules, cache, q, out, lse, scale, step, int(state["step"]))

    def _replay(
        self,
        modules: list[Any],
        cache: Any,
        q: torch.Tensor,
        out: torch.Tensor,
        lse: torch.Tensor,
        scale: float,
        step: StepCertificate,
        index: int,
    ) -> None:
        """Each layer's exact error [B, Hkv, G] beside the step's certificate, and the draws covering it."""
        if not self.extra_stacked and self.draws > 1 and self.stacked is not None:
            layers, own = range(len(modules)), self.stacked
            self.extra_stacked = [
                _sharing_dropped(stack_samples([self.extra_samples[i][d] for i in layers]), own)
                for d in range(self.draws - 1)
            ]
        true = torch.stack(
            [
                exact_error(q[i], cache.layers[i].keys, cache.layers[i].values, *self.dropped[i], scale)
                for i in range(len(modules))
            ]
        )  # [L, B, Hkv, G] float64
        covering = (true <= step.bound.double() + TOLERANCE).long()
        for extra in self.extra_stacked:
            bound = certify_with_lse(q, out, lse, extra, scale, self.settings.confidence).bound
            covering += (true <= bound.double() + TOLERANCE).long()
        cells = self.cells
        for i in range(len(modules)):
            cells.true.append(true[i])
            cells.covering_draws.append(covering[i])
            cells.estimate.append(step.estimate[i])
            cells.corrected.append(step.corrected[i])
            cells.bound.append(step.bound[i])
            cells.output_norm.append(step.output_norm[i])
            cells.capped.append(step.capped[i])
            cells.layer.append(i)
            cells.step.append(index)

    def summary(self) -> CertificateSummary | None:
        """None when no decoding step was certified (the first token ended the output)."""
        if not self.bounds:
            return None
        bounds, estimates = torch.stack(self.bounds), torch.stack(self.estimates)
        output_norm = torch.stack(self.output_norms).clamp_min(RELATIVE_FLOOR)
        return CertificateSummary(
            bound_max=float(bounds.max()),
            bound_mean=float(bounds.mean()),
            estimate_mean=float(estimates.mean()),
            relative_bound_mean=float((bounds / output_norm).mean()),
            relative_estimate_mean=float((estimates / output_norm).mean()),
            cap_share=float(torch.stack(self.capped).float().mean()),
            cells=bounds.numel(),
        )


def _sharing_dropped(sample: DroppedSample, own: DroppedSample) -> DroppedSample:
    """Another draw of the same dropped set: its sample, and `own`'s tensors of the whole dropped set (the
    same values, kept once)."""
    return dataclasses.replace(
        sample,
        dropped_keys=own.dropped_keys,
        dropped_value_norms=own.dropped_value_norms,
        dropped_inclusion=own.dropped_inclusion,
        dropped_present=own.dropped_present,
    )
