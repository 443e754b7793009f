"""llama.cpp's GGML KV cache types, simulated: each 32-value block quantised as ggml's reference
quantisers do (ggml/src/ggml-quants.c, `quantize_row_*_ref`), then dequantised.

x [B, H, n, D] is cut along D into blocks of 32 (llama.cpp stores a K or V row of a token, head after
head, in 32-value blocks, so with D a multiple of 32 no block straddles two heads). Per block, with
scales computed in float32 and stored as float16 (`fp16`):
- q8_0: d = amax/127, q = round(x/d) (half away from zero), x̂ = q·fp16(d);
- q4_0 / q5_0: m the value of largest magnitude (its sign kept), d = m/−8 (/−16),
  q = min(15, ⌊x/d + 8.5⌋) (min(31, ⌊x/d + 16.5⌋)), x̂ = (q − 8)·fp16(d) ((q − 16)·fp16(d));
- q4_1 / q5_1: d = (max − min)/15 (/31), q = min(15, ⌊(x − min)/d + 0.5⌋) (31), x̂ = q·fp16(d) + fp16(min);
- iq4_nl: 4-bit indices into ggml's 16-value non-linear table, coded with d = m/−127, then d refitted
  by weighted least squares (weights x²), as llama.cpp's CPU cache writer (`quantize_row_iq4_nl_ref`);
Each is bit-identical to ggml's own quantise-dequantise round trip (tests/engines/hf/test_kv_formats.py
runs both on the same values through llama-cpp-python's libggml);
- f16, bf16: each value rounded to that float; f32: unchanged.
A block whose scale is 0 (all zeros) dequantises to zeros.
"""

from __future__ import annotations

import torch

BLOCK = 32
IQ4_NL_TABLE = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)
"""ggml's `kvalues_iq4nl`: the values iq4_nl's 4-bit indices stand for, times the block scale."""
FLOATS = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def round_half_away(x: torch.Tensor) -> torch.Tensor:
    """C's roundf: halves go away from zero (torch.round goes to even)."""
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


def fp16(x: torch.Tensor) -> torch.Tensor:
    """Through float16 and back, as ggml stores a block's scale and minimum."""
    return x.to(torch.float16).to(torch.float32)


def _inverse(d: torch.Tensor) -> torch.Tensor:
    """1/d, and 0 where d is 0 (ggml's `id = d ? 1/d : 0`)."""
    return torch.where(d != 0, 1.0 / torch.where(d != 0, d, torch.ones_like(d)), torch.zeros_like(d))


def _signed_max(blocks: torch.Tensor) -> torch.Tensor:
    """blocks [..., 32] → [..., 1]: the value of largest magnitude, its sign kept (the first of ties)."""
    return blocks.gather(-1, blocks.abs().argmax(dim=-1, keepdim=True))


def _symmetric(blocks: torch.Tensor, levels: int) -> torch.Tensor:
    """q4_0 (levels 16) and q5_0 (32): offset codes around levels/2."""
    half = levels // 2
    d = _signed_max(blocks) / -half
    q = torch.clamp(torch.floor(blocks * _inverse(d) + half + 0.5), max=levels - 1)
    return (q - half) * fp16(d)


def _with_minimum(blocks: torch.Tensor, levels: int) -> torch.Tensor:
    """q4_1 (levels 16) and q5_1 (32): codes from the block's minimum."""
    low = blocks.amin(dim=-1, keepdim=True)
    d = (blocks.amax(dim=-1, keepdim=True) - low) / (levels - 1)
    q = torch.clamp(torch.floor((blocks - low) * _inverse(d) + 0.5), max=levels - 1)
    return q * fp16(d) + fp16(low)


def _q8_0(blocks: torch.Tensor) -> torch.Tensor:
    d = blocks.abs().amax(dim=-1, keepdim=True) / 127
    return round_half_away(blocks * _inverse(d)) * fp16(d)


def _nearest_index(scaled: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """The table index nearest each value; a tie goes to the upper one, as ggml's `best_index_int8`."""
    distance = (scaled.unsqueeze(-1) - table).abs().flip(-1)
    return table.numel() - 1 - distance.argmin(dim=-1)


def _iq4_nl(blocks: torch.Tensor) -> torch.Tensor:
    """blocks [..., 32]: codes from d = m/−127 (m mapped to the table's −127), then the least-squares
    scale d = Σw·q·x / Σw·q² for those codes, as llama.cpp writes its cache (`quantize_row_iq4_nl_ref`:
    no search over further scales)."""
    table = torch.tensor(IQ4_NL_TABLE, dtype=torch.float32, device=blocks.device)
    m = _signed_max(blocks)
    codes = table[_nearest_index(blocks * _inverse(m / table[0]), table)]
    weight = blocks * blocks
    sum_qx = (weight * codes * blocks).sum(dim=-1, keepdim=True)
    sum_q2 = (weight * codes * codes).sum(dim=-1, keepdim=True)
    d = sum_qx / torch.where(sum_q2 > 0, sum_q2, torch.ones_like(sum_q2))
    return torch.where(m != 0, codes * fp16(d), torch.zeros_like(blocks))


QUANTISERS = {
    "q8_0": _q8_0,
    "q4_0": lambda b: _symmetric(b, 16),
    "q5_0": lambda b: _symmetric(b, 32),
    "q4_1": lambda b: _with_minimum(b, 16),
    "q5_1": lambda b: _with_minimum(b, 32),
    "iq4_nl": _iq4_nl,
}


def fake_quantize_ggml(x: torch.Tensor, dtype: str) -> torch.Tensor:
    """x [B, H, n, D] (D a multiple of 32 for the block types) → x through GGML `dtype` and back, in x's
    dtype and shape."""
    if x.dim() != 4:
        raise ValueError(f"expected x of shape [B, H, n, D], got {tuple(x.shape)}")
    if dtype in FLOATS:
        return x.to(FLOATS[dtype]).to(x.dtype)
    if dtype not in QUANTISERS:
        raise ValueError(f"dtype must be one of {', '.join([*FLOATS, *QUANTISERS])}, got {dtype!r}")
    b, h, n, d = x.shape
    if d % BLOCK:
        raise ValueError(f"{dtype} stores {BLOCK}-value blocks; a head dimension of {d} is not a multiple")
    blocks = x.float().reshape(b, h, n, d // BLOCK, BLOCK)
    return QUANTISERS[dtype](blocks).reshape(b, h, n, d).to(x.dtype)
