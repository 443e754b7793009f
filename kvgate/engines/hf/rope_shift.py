"""Move cached keys to other positions by re-rotating them: RoPE rotations compose, R(p + Δ) = R(Δ) R(p).

RoPE (Su et al., 2021, "RoFormer") rotates each pair of a key's dimensions (i, i + D/2) by the angle
p · θ_i, so a key cached at position p becomes the key at p + Δ by one more rotation by Δ · θ_i. Values
carry no position. This is how position-independent caching (EPIC, Hu et al., 2024; CacheBlend, Yao
et al., 2024) places KV computed for a span at positions 0…len-1 at any offset. The angles come from
the model's own rotary embedding, so its θ_i and rope scaling are honoured; rope types whose
frequencies change with the sequence length ("dynamic", "longrope") do not compose and are refused.
"""

from __future__ import annotations

from typing import Any

import torch

NON_COMPOSING_ROPE_TYPES = ("dynamic", "longrope")


def rotary_embedding(model: Any) -> Any | None:
    """The model's shared rotary embedding (`model.model.rotary_emb` in Llama-style models), or None."""
    return getattr(getattr(model, "model", None), "rotary_emb", None)


def rope_shift_refusal(model: Any) -> str | None:
    """Why keys of `model` cannot be re-rotated, or None when they can."""
    rotary = rotary_embedding(model)
    if rotary is None:
        return "span reuse re-rotates keys with the model's rotary embedding, and this model has none"
    rope_type = getattr(rotary, "rope_type", "default")
    if rope_type in NON_COMPOSING_ROPE_TYPES:
        return (
            f"span reuse needs RoPE frequencies that do not depend on length; this model uses {rope_type!r}"
        )
    return None


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[..., D] → [..., D]: (x1, x2) ↦ (-x2, x1) over the two halves of the last dimension."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def rope_shift(keys: torch.Tensor, delta: int, rotary: Any) -> torch.Tensor:
    """keys [B, Hkv, n, D] rotated at positions p…p+n-1 → the same keys rotated at p+Δ…p+Δ+n-1.

    `rotary` is the model's rotary embedding: called as rotary(x, position_ids [1, 1]) it returns cos
    and sin [1, 1, R] (R = D, or the leading rotated dims under partial rotary), times its
    `attention_scaling`, which is divided out since the keys carry it already. The rotation runs in
    float32 and the result keeps the keys' dtype.
    """
    probe = torch.zeros(1, dtype=torch.float32, device=keys.device)
    cos, sin = rotary(probe, torch.tensor([[delta]], device=keys.device))
    scale = float(getattr(rotary, "attention_scaling", 1.0) or 1.0)
    cos, sin = (cos / scale)[:, None], (sin / scale)[:, None]  # [1, 1, 1, R], broadcast over B, Hkv, n
    k = keys.to(torch.float32)
    rotated, rest = k[..., : cos.shape[-1]], k[..., cos.shape[-1] :]  # R < D under partial rotary
    return torch.cat((rotated * cos + rotate_half(rotated) * sin, rest), dim=-1).to(keys.dtype)
