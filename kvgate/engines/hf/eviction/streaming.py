"""StreamingLLM: keep the first `sink_tokens` entries (attention sinks) and the most recent ones.

Xiao et al., 2023, "Efficient Streaming Language Models with Attention Sinks" (arXiv:2309.17453).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvgate.engines.hf.eviction.base import ScoringInputs, check_ratio


@dataclass(frozen=True)
class StreamingLLM:
    """Score = position, with sinks first: top-k then keeps the sinks and the k − sinks most recent."""

    ratio: float = 0.5
    sink_tokens: int = 4

    def __post_init__(self) -> None:
        check_ratio(self.ratio)
        if self.sink_tokens < 0:
            raise ValueError(f"sink_tokens must be ≥ 0, got {self.sink_tokens}")

    def scores(self, inputs: ScoringInputs) -> torch.Tensor:
        b, h, n, _ = inputs.keys.shape
        score = torch.arange(n, dtype=torch.float32).expand(b, h, n).clone()
        score[..., : self.sink_tokens] = float(n + 1)
        return score
