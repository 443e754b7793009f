"""FP8 KV storage, simulated: quantise to an FP8 format with a scale, then dequantise on read.

Formats (Micikevicius et al., 2022, "FP8 Formats for Deep Learning", arXiv:2209.05433): E4M3 (torch
`float8_e4m3fn`, max 448, 3 mantissa bits: relative rounding error ≤ 2⁻⁴ for normal values) and E5M2
(`float8_e5m2`, max 57344, 2 mantissa bits: ≤ 2⁻³). The scale maps the largest magnitude of its group
onto the format's max: amax / fp8_max, per "tensor", per "head" (over batch, positions and head dim)
or per "token" (one scale per cached entry and head).
"""

from __future__ import annotations

import torch

FP8_FORMATS = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
# Dims of x [B, H, n, D] that share one scale.
SHARED_DIMS = {"tensor": (0, 1, 2, 3), "head": (0, 2, 3), "token": (3,)}


def fake_quantize(
    x: torch.Tensor, dtype: str, scale: str, fixed_scale: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [B, H, n, D] → (x through FP8 `dtype` and back, in x.dtype; the float32 scale used).

    The scale has x's rank and broadcasts to it: [1, 1, 1, 1] for "tensor", [1, H, 1, 1] for "head",
    [B, H, n, 1] for "token"; an all-zero group gets scale 1, so zeros stay zeros. With `fixed_scale`
    (a scale computed at prefill, for entries appended while decoding) that scale is used instead and
    values beyond it saturate at ±fp8_max rather than overflowing to inf or NaN.
    """
    if dtype not in FP8_FORMATS:
        raise ValueError(f"dtype must be one of {', '.join(FP8_FORMATS)}, got {dtype!r}")
    if scale not in SHARED_DIMS:
        raise ValueError(f"scale must be one of {', '.join(SHARED_DIMS)}, got {scale!r}")
    if x.dim() != 4:
        raise ValueError(f"expected x of shape [B, H, n, D], got {tuple(x.shape)}")
    fp8 = FP8_FORMATS[dtype]
    fp8_max = torch.finfo(fp8).max
    wide = x.float()
    if fixed_scale is not None:
        used = fixed_scale.to(device=x.device, dtype=torch.float32)
        if not bool((used > 0).all()):
            raise ValueError("fixed_scale must be positive")
    elif x.numel() == 0:
        dims = SHARED_DIMS[scale]
        used = torch.ones([1 if d in dims else s for d, s in enumerate(x.shape)], device=x.device)
    else:
        amax = wide.abs().amax(dim=SHARED_DIMS[scale], keepdim=True)
        used = torch.where(amax > 0, amax / fp8_max, torch.ones_like(amax))
    coded = (wide / used).clamp(-fp8_max, fp8_max).to(fp8)
    return (coded.float() * used).to(x.dtype), used
