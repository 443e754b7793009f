"""Each KV dtype the hf reference simulates: how to code a tensor of cached entries, and the bytes its
format stores per value (its scales included).

`simulate(x, dtype, scale, fixed)`: x [B, H, n, D] → (x through `dtype` and back, the state to keep for
entries appended later or None). FP8 keeps its tensor or head scale (fp8.fake_quantize); NVFP4 its
per-tensor scale; the per-token-head dtypes and the GGML types need none (each entry, each block, is
scaled alone). TurboQuant's rotated Lloyd-Max codebooks are not simulated (refused.py).
"""

from __future__ import annotations

import torch

from kvgate.engines.hf.fp8 import FP8_FORMATS, fake_quantize
from kvgate.engines.hf.kv_formats import ggml, nvfp4, per_token_head
from kvgate.engines.hf.kv_formats.refused import REFUSED
from kvgate.engines.llamacpp.kv_types import LAYOUTS
from kvgate.treatments.spec import NVFP4_DTYPES


def simulate(
    x: torch.Tensor, dtype: str, scale: str, fixed: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """x [B, H, n, D] through `dtype` and back, and the state later entries reuse (None: none)."""
    if dtype in FP8_FORMATS:
        coded, used = fake_quantize(x, dtype, scale, fixed)
        return coded, used if scale != "token" else None
    if dtype in NVFP4_DTYPES:
        g = fixed if fixed is not None else nvfp4.global_scale(x)
        return nvfp4.fake_quantize_nvfp4(x, g), g
    if dtype in per_token_head.SIMULATORS:
        return per_token_head.SIMULATORS[dtype](x), None
    if dtype in LAYOUTS:
        return ggml.fake_quantize_ggml(x, dtype), None
    raise ValueError(REFUSED.get(dtype, f"the hf engine has no KV format {dtype!r}"))


def bytes_per_value(dtype: str, d: int, model_bytes: int) -> float:
    """Bytes `dtype` stores per cached value with head dimension `d` (FP8: 1; the model's own floats:
    `model_bytes`), its block or row scales included."""
    if dtype in FP8_FORMATS:
        return 1.0
    if dtype in NVFP4_DTYPES:
        return nvfp4.row_bytes(d) / d
    if dtype in per_token_head.SIMULATORS:
        return per_token_head.row_bytes(dtype, d) / d
    if dtype in LAYOUTS:
        layout = LAYOUTS[dtype]
        return layout.bytes / layout.values
    return float(model_bytes)
