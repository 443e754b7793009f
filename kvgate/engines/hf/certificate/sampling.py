"""Which dropped entries the certificate keeps: a Poisson sample with stated inclusion probabilities.

Poisson sampling (Hájek, 1964; Särndal, Swensson and Wretman, 1992, "Model Assisted Survey Sampling",
§3.5): entry j of the dropped set D enters the sample S independently with probability π_j, so that
Horvitz–Thompson sums Σ_S y_j / π_j are unbiased for Σ_D y_j and Σ_S (1 − π_j) y_j² / π_j² is an unbiased
estimate of their variance. π_j follows a proxy of the attention the entry will receive: the attention of
the prompt's last `window` queries (the largest over the window and the group's query heads), mixed half
and half with the uniform share (defensive importance sampling, Hesterberg, 1995, Technometrics 37(2)),
scaled so the expected sample size is `share` · |D| (at least `min_size`), capped at 1 and floored at
`floor`: no dropped entry is unreachable.

Besides the sample, the certificate keeps every dropped entry's key, its value's norm and its π (not its
value): at decode time the keys give every dropped entry's exact attention weight, so the normaliser is
exact and the bound needs no estimate of the sample's variance (estimator).

Shapes: B batch, Hkv key heads, Hq = Hkv · G query heads, n positions of the compressed span, k kept,
d = n − k dropped (the same for every head), m the largest sample size over heads, D head dim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from kvgate.engines.hf.eviction.attention import grouped_attention

BISECTION_STEPS = 32
MIXTURE = 0.5
"""Weight of the uniform share in the defensive mixture."""


@dataclass(frozen=True)
class DroppedSample:
    """One layer's sample of its dropped entries, padded to m per head, and its whole dropped set's keys.

    keys, values: [B, Hkv, m, D] (padding rows are zeros); inclusion: [B, Hkv, m] π_j of each sampled
    entry (1 on padding); present: [B, Hkv, m] bool, False on padding. Of every dropped entry (d per
    head): dropped_keys [B, Hkv, d, D], dropped_value_norms [B, Hkv, d] ‖v_j‖, dropped_inclusion
    [B, Hkv, d] π_j, dropped_present [B, Hkv, d] (False on padding when layers are stacked).
    """

    keys: torch.Tensor
    values: torch.Tensor
    inclusion: torch.Tensor
    present: torch.Tensor
    dropped_keys: torch.Tensor
    dropped_value_norms: torch.Tensor
    dropped_inclusion: torch.Tensor
    dropped_present: torch.Tensor


def attention_proxy(queries: torch.Tensor, keys: torch.Tensor, window: int) -> torch.Tensor:
    """[B, Hkv, n]: the largest attention any of the last `window` queries of any query head of the group
    pays each key. queries [B, Hq, t, D] are those of the span's last t ≤ n positions (t ≥ window, or t = n);
    keys [B, Hkv, n, D]."""
    n = keys.shape[2]
    w = min(window, n, queries.shape[2])
    probs = grouped_attention(queries[:, :, -w:], keys, first=n - w)  # [B, Hkv, G, w, n]
    return probs.amax(dim=(2, 3))


def inclusion_probabilities(proxy: torch.Tensor, size: float, floor: float) -> torch.Tensor:
    """π [B, Hkv, d] from proxy [B, Hkv, d] ≥ 0: min(1, max(floor, c · p)), p the defensive mixture of the
    normalised proxy with 1/d, and c per head found by bisection so that Σ_j π_j = size (when the floor
    alone does not exceed it)."""
    d = proxy.shape[-1]
    total = proxy.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(proxy.dtype).tiny)
    mixed = (1 - MIXTURE) * proxy / total + MIXTURE / d  # [B, Hkv, d], sums to 1, ≥ MIXTURE / d
    low = torch.zeros_like(total)
    high = torch.full_like(total, d / MIXTURE)  # c · min(p) ≥ 1 here: every π_j = 1
    for _ in range(BISECTION_STEPS):
        mid = (low + high) / 2
        expected = (mid * mixed).clamp(floor, 1.0).sum(dim=-1, keepdim=True)
        too_many = expected > size
        high = torch.where(too_many, mid, high)
        low = torch.where(too_many, low, mid)
    return (high * mixed).clamp(floor, 1.0)


def draw_sample(
    keys: torch.Tensor,
    values: torch.Tensor,
    dropped: torch.Tensor,
    inclusion: torch.Tensor,
    seed: tuple[int, ...],
) -> DroppedSample:
    """Poisson-sample the dropped entries: keys, values [B, Hkv, n, D]; dropped [B, Hkv, d] their indices;
    inclusion [B, Hkv, d] their π. Uniforms come from a CPU generator seeded by `seed` (reproducible on any
    device)."""
    state = np.random.SeedSequence(list(seed)).generate_state(1, dtype=np.uint64)[0]
    generator = torch.Generator(device="cpu").manual_seed(int(state) & (2**63 - 1))
    chosen = torch.rand(inclusion.shape, generator=generator).to(inclusion.device) < inclusion  # [B, Hkv, d]
    m = max(1, int(chosen.sum(dim=-1).max()))
    # Sampled entries first (stable, in position order), then padding.
    order = torch.sort((~chosen).to(torch.int8), dim=-1, stable=True).indices[..., :m]  # [B, Hkv, m]
    present = torch.gather(chosen, -1, order)
    index = torch.gather(dropped, -1, order)
    dim = keys.shape[-1]
    gathered_keys = torch.gather(keys, 2, index.unsqueeze(-1).expand(-1, -1, -1, dim))
    gathered_values = torch.gather(values, 2, index.unsqueeze(-1).expand(-1, -1, -1, dim))
    mask = present.unsqueeze(-1)
    every = dropped.unsqueeze(-1).expand(-1, -1, -1, dim)
    return DroppedSample(
        keys=torch.where(mask, gathered_keys, 0).float(),
        values=torch.where(mask, gathered_values, 0).float(),
        inclusion=torch.where(present, torch.gather(inclusion, -1, order), 1.0).float(),
        present=present,
        dropped_keys=torch.gather(keys, 2, every).float(),
        dropped_value_norms=torch.gather(values, 2, every).float().norm(dim=-1),
        dropped_inclusion=inclusion.float(),
        dropped_present=torch.ones_like(dropped, dtype=torch.bool),
    )


def expected_size(dropped: int, share: float, min_size: int) -> float:
    """The expected sample size: share · d, at least min(min_size, d)."""
    return float(min(dropped, max(math.ceil(share * dropped), min_size)))


def dropped_indices(kept: torch.Tensor, n: int) -> torch.Tensor:
    """kept [B, Hkv, k] (distinct positions in [0, n)) → dropped [B, Hkv, n − k], ascending."""
    mask = torch.ones(*kept.shape[:-1], n, dtype=torch.bool, device=kept.device)
    mask.scatter_(-1, kept, False)
    order = torch.sort((~mask).to(torch.int8), dim=-1, stable=True).indices
    return order[..., : n - kept.shape[-1]]


def stack_samples(samples: list[DroppedSample]) -> DroppedSample:
    """Every layer's sample in one, padded to the largest m (and d): tensors [L, B, Hkv, m or d, …]."""
    m = max(s.keys.shape[2] for s in samples)
    d = max(s.dropped_keys.shape[2] for s in samples)

    def pad(t: torch.Tensor, value: float | bool, size: int) -> torch.Tensor:
        extra = size - t.shape[2]
        if extra == 0:
            return t
        shape = (*t.shape[:2], extra, *t.shape[3:])
        return torch.cat([t, torch.full(shape, value, dtype=t.dtype, device=t.device)], dim=2)

    def stacked(name: str, value: float | bool, size: int) -> torch.Tensor:
        return torch.stack([pad(getattr(s, name), value, size) for s in samples])

    return DroppedSample(
        keys=stacked("keys", 0.0, m),
        values=stacked("values", 0.0, m),
        inclusion=stacked("inclusion", 1.0, m),
        present=stacked("present", False, m),
        dropped_keys=stacked("dropped_keys", 0.0, d),
        dropped_value_norms=stacked("dropped_value_norms", 0.0, d),
        dropped_inclusion=stacked("dropped_inclusion", 1.0, d),
        dropped_present=stacked("dropped_present", False, d),
    )
