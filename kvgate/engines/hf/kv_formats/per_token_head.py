"""vLLM's per-token-head KV cache dtypes, simulated: one float32 scale per cached token and KV head,
computed as the entry is written (vLLM's Triton writers in vllm/v1/attention/ops, and
`TritonAttentionBackend.customize_spec`, which keeps a float32 scale after each head's values).

x [B, H, n, D]; each [D] row (one token, one head) gets its own scale:
- int8_per_token_head: s = max(amax/127, 1e-6), q = trunc(clamp(x/s, −128, 127)) (a float stored into
  int8 truncates toward zero), x̂ = q·s;
- fp8_per_token_head: s = max(amax/448, 1e-6), q = E4M3(clamp(x/s, ±448)) (round to nearest), x̂ = q·s;
- int4_per_token_head: the row is first rotated by a random Hadamard transform R (orthonormal: D a
  power of two; fixed random signs, seed RHT_SEED: vLLM's own signs are not reproduced), then coded
  asymmetrically: s = max((max − min)/15, 1e-6), z = clamp(round(−min/s), 0, 15),
  q = clamp(round(x/s + z), 0, 15), x̂ = Rᵀ((q − z)·s'), where s' is s with its 4 lowest mantissa bits
  replaced by z (vLLM stores the zero point there).
Stored bytes per row: D (int8, fp8) or D/2 (int4) plus the 4-byte scale (vLLM's Triton backend keeps
the scale beside each head's values).
"""

from __future__ import annotations

import torch

SCALE_FLOOR = 1e-6
RHT_SEED = 0
SCALE_BYTES = 4


def _rows(x: torch.Tensor) -> torch.Tensor:
    if x.dim() != 4:
        raise ValueError(f"expected x of shape [B, H, n, D], got {tuple(x.shape)}")
    return x.float()


def int8_per_token_head(x: torch.Tensor) -> torch.Tensor:
    """x [B, H, n, D] → x through INT8 with a scale per row, in x's dtype."""
    wide = _rows(x)
    scale = torch.clamp(wide.abs().amax(dim=-1, keepdim=True) / 127, min=SCALE_FLOOR)
    coded = torch.trunc(torch.clamp(wide / scale, -128, 127))
    return (coded * scale).to(x.dtype)


def fp8_per_token_head(x: torch.Tensor) -> torch.Tensor:
    """x [B, H, n, D] → x through FP8 E4M3 with a scale per row, in x's dtype."""
    wide = _rows(x)
    top = torch.finfo(torch.float8_e4m3fn).max
    scale = torch.clamp(wide.abs().amax(dim=-1, keepdim=True) / top, min=SCALE_FLOOR)
    coded = torch.clamp(wide / scale, -top, top).to(torch.float8_e4m3fn).float()
    return (coded * scale).to(x.dtype)


def hadamard_rotation(d: int, device: torch.device | None = None) -> torch.Tensor:
    """[D, D] orthonormal H·diag(signs)/√D, H the Sylvester Hadamard matrix (D a power of two)."""
    if d < 1 or d & (d - 1):
        raise ValueError(f"int4_per_token_head's Hadamard rotation needs D a power of two, got {d}")
    h = torch.ones(1, 1)
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    generator = torch.Generator().manual_seed(RHT_SEED)
    signs = torch.randint(0, 2, (d,), generator=generator).float() * 2 - 1
    return (h * signs / d**0.5).to(device)


def round_half_away(x: torch.Tensor) -> torch.Tensor:
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


def int4_per_token_head(x: torch.Tensor) -> torch.Tensor:
    """x [B, H, n, D] → x rotated, through asymmetric INT4 with a scale and zero point per row, and
    rotated back, in x's dtype."""
    wide = _rows(x)
    rotation = hadamard_rotation(wide.shape[-1], wide.device)
    turned = wide @ rotation
    low, high = turned.amin(dim=-1, keepdim=True), turned.amax(dim=-1, keepdim=True)
    scale = torch.clamp((high - low) / 15, min=SCALE_FLOOR)
    zero = torch.clamp(round_half_away(-low / scale), 0, 15)
    coded = torch.clamp(round_half_away(turned / scale + zero), 0, 15)
    stored = ((scale.view(torch.int32) & -16) | zero.to(torch.int32)).view(torch.float32)
    return (((coded - zero) * stored) @ rotation.T).to(x.dtype)


def row_bytes(dtype: str, d: int) -> float:
    """Bytes a row of `d` values takes in `dtype`, its scale included."""
    return (d / 2 if dtype == "int4_per_token_head" else d) + SCALE_BYTES


SIMULATORS = {
    "int8_per_token_head": int8_per_token_head,
    "fp8_per_token_head": fp8_per_token_head,
    "int4_per_token_head": int4_per_token_head,
}
