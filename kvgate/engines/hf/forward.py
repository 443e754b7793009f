"""One forward pass at explicit positions against a transformers cache (prefill chunks and decode steps)."""

from __future__ import annotations

from typing import Any

import torch

from kvgate.engines.hf import prefill_step
from kvgate.engines.hf.decode_step import applies, decode_step


def forward_at(model: Any, ids: torch.Tensor, cache: Any, first_position: int) -> torch.Tensor:
    """Run ids [B, m] at true positions first_position…first_position+m-1 against `cache`, appending their KV.

    Returns the last position's logits [B, 1, vocab]. The attention mask follows the cache's length, so
    a cache shortened by eviction still decodes at the original next position. A decode step (m = 1) of
    a model decode_step computes exactly runs as its flat op sequence, and so does a prompt into an empty
    cache that prefill_step computes exactly; anything else runs through the modules.
    """
    if applies(model, ids):
        logits = decode_step(model, ids, cache, first_position)
    elif prefill_step.applies(model, ids, cache, first_position):
        logits = prefill_step.prefill(model, ids, cache)
    else:
        positions = torch.arange(first_position, first_position + ids.shape[1], device=ids.device)
        out = model(
            input_ids=ids,
            past_key_values=cache,
            position_ids=positions.unsqueeze(0),
            use_cache=True,
            logits_to_keep=1,
        )
        logits = out.logits
    if not torch.isfinite(logits[:, -1]).all():
        raise RuntimeError("non-finite logits")
    return logits
