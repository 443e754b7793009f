"""NVFP4 KV storage, simulated (vLLM's `nvfp4` cache dtype: 4-bit values with an FP8 E4M3 scale per 16
values, head_size/2 + head_size/16 bytes per head; vllm/v1/attention/ops, the NVFP4 reshape_and_cache).

Format (NVIDIA, "NVFP4", in the OCP Microscaling family: Rouhani et al., 2023, arXiv:2310.10537): each
value is E2M1 (±{0, 0.5, 1, 1.5, 2, 3, 4, 6}); each block of 16 along D has a scale stored as E4M3, and
the whole tensor a float32 scale g that keeps the block scales in E4M3's range:
g = amax/(6·448); block scale s = E4M3(block amax/6/g); q = E2M1(x/(s·g)) (round to nearest, ties to
even, saturating at ±6); x̂ = q·s·g. A block whose scale is 0 dequantises to zeros. g is computed from
the prefilled cache and kept for entries appended later (as a static per-layer scale is); where vLLM
takes it from (a calibrated k_scale or 1.0) is not reproduced.
"""

from __future__ import annotations

import torch

BLOCK = 16
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0
E4M3_MAX = 448.0


def e2m1(magnitude: torch.Tensor) -> torch.Tensor:
    """Non-negative values → the nearest E2M1 magnitude, ties to the even code (0, 1, 2, 4), ≤ 6."""
    grid = torch.tensor(E2M1_VALUES, device=magnitude.device)
    distance = (magnitude.clamp(max=E2M1_MAX).unsqueeze(-1) - grid).abs()
    nearest = distance == distance.amin(dim=-1, keepdim=True)
    even = nearest & (torch.arange(len(E2M1_VALUES), device=magnitude.device) % 2 == 0)
    index = torch.where(even.any(-1), even.int().argmax(-1), nearest.int().argmax(-1))
    return grid[index]


def global_scale(x: torch.Tensor) -> torch.Tensor:
    """x [B, H, n, D] → [B, 1, 1, 1]: each row's amax/(6·448) (1 where the row is all zeros or empty)."""
    if x.numel() == 0:
        return torch.ones(x.shape[0], 1, 1, 1, device=x.device)
    amax = x.float().abs().amax(dim=(1, 2, 3), keepdim=True)
    return torch.where(amax > 0, amax / (E2M1_MAX * E4M3_MAX), torch.ones_like(amax))


def fake_quantize_nvfp4(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [B, H, n, D] (D a multiple of 16), scale [B, 1, 1, 1] (`global_scale`) → x through NVFP4 and
    back, in x's dtype."""
    if x.dim() != 4:
        raise ValueError(f"expected x of shape [B, H, n, D], got {tuple(x.shape)}")
    b, h, n, d = x.shape
    if d % BLOCK:
        raise ValueError(f"nvfp4 stores {BLOCK}-value blocks; a head dimension of {d} is not a multiple")
    g = scale.float().unsqueeze(-1)
    blocks = x.float().reshape(b, h, n, d // BLOCK, BLOCK)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    block_scale = torch.clamp(amax / E2M1_MAX / g, max=E4M3_MAX).to(torch.float8_e4m3fn).float()
    step = block_scale * g
    safe = torch.where(step > 0, step, torch.ones_like(step))
    coded = torch.sign(blocks) * e2m1(blocks.abs() / safe)
    return torch.where(step > 0, coded * step, torch.zeros_like(blocks)).reshape(b, h, n, d).to(x.dtype)


def row_bytes(d: int) -> float:
    """Bytes a row of `d` values takes: d/2 for the values, d/16 for the block scales."""
    return d / 2 + d / BLOCK
