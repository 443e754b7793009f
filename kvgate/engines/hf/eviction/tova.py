"""TOVA: keep the entries the last query attends to most.

Oren et al., 2024, "Transformers are Multi-State RNNs" (arXiv:2401.06104), Token Omission Via
Attention.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvgate.engines.hf.eviction.attention import grouped_attention, protect_recent
from kvgate.engines.hf.eviction.base import ScoringInputs, check_ratio


@dataclass(frozen=True)
class TOVA:
    """Score = attention of the last query over all n keys, averaged over each group's query heads.

    The query at position n − 1 ([B, Hq, 1, D]) gives [B, Hkv, G, 1, n]; the mean over G → [B, Hkv, n].
    The last entry is always kept. The paper averages over all heads of a layer (every head drops the
    same token); here each key head keeps its own entries, averaging only the heads that read it.
    """

    ratio: float = 0.5
    query_window: int = 1
    """The prompt queries it reads: the last one."""

    def __post_init__(self) -> None:
        check_ratio(self.ratio)

    def scores(self, inputs: ScoringInputs) -> torch.Tensor:
        n = inputs.n
        probs = grouped_attention(inputs.queries[:, :, -1:], inputs.keys, first=n - 1)
        return protect_recent(probs.mean(dim=(2, 3)), 1)
