"""The eviction seam: a method scores every cached entry; the highest-scoring ones are kept.

Shapes: B batch, Hkv key/value heads, Hq query heads (Hq = Hkv · group for GQA), n cached positions of
the span being compressed, D head dim. Keys are cached after RoPE, so gathering entries keeps each one at
its original position; decoding continues at the original next position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from kvgate.treatments.spec import kept_entries


@dataclass(frozen=True)
class ScoringInputs:
    """What one layer offers a scorer after prefill.

    keys, values: [B, Hkv, n, D] as cached (keys rotated). queries: [B, Hq, m, D] rotated queries of the
    span's last m positions (the prefill's own queries): all n, or only the last `query_window` of a
    method that declares one (SnapKV its window, TOVA the last query), which are all it reads. layer:
    the layer index, for methods that vary by depth.
    """

    keys: torch.Tensor
    values: torch.Tensor
    queries: torch.Tensor
    layer: int

    @property
    def n(self) -> int:
        return int(self.keys.shape[2])


class EvictionMethod(Protocol):
    """A frozen dataclass with one hook; `ratio` is the share of the span's entries removed."""

    @property
    def ratio(self) -> float: ...

    def scores(self, inputs: ScoringInputs) -> torch.Tensor:
        """[B, Hkv, n] — higher means keep. Ties are broken towards later positions by `keep_indices`."""
        ...


def n_keep(n: int, ratio: float, convention: str = "kvgate") -> int:
    """Entries kept of n when a share `ratio` is removed (`treatments.spec.kept_entries`, which engines
    without torch share)."""
    return kept_entries(n, ratio, convention)


def keep_indices(scores: torch.Tensor, keep: int, convention: str = "kvgate") -> torch.Tensor:
    """[B, Hkv, keep] indices of the top-`keep` scores per head, sorted by position (ascending).

    Ties go to later positions (kvgate) or earlier ones (kvpress), exactly: a stable descending sort over
    the position-reversed (or the plain) scores.
    """
    n = scores.shape[-1]
    if convention == "kvpress":
        order = torch.sort(scores, dim=-1, descending=True, stable=True).indices[..., :keep]
        return torch.sort(order, dim=-1).values
    order = torch.sort(scores.flip(-1), dim=-1, descending=True, stable=True).indices[..., :keep]
    return torch.sort(n - 1 - order, dim=-1).values


def gather_kept(tensor: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """tensor [B, Hkv, n, D], indices [B, Hkv, k] → [B, Hkv, k, D]."""
    return torch.gather(tensor, 2, indices.unsqueeze(-1).expand(-1, -1, -1, tensor.shape[-1]))


def check_ratio(ratio: float) -> None:
    if not 0.0 <= ratio < 1.0:
        raise ValueError(f"ratio must be in [0, 1), got {ratio}")
