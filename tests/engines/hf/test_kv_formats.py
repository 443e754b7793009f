"""The hf reference's KV formats (engines/hf/kv_formats) against values worked out by hand from each
format's definition, and the GGML types against ggml's own quantise-dequantise (libggml)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
import torch

from kvgate.engines.hf.kv_formats.formats import bytes_per_value, simulate
from kvgate.engines.hf.kv_formats.ggml import fake_quantize_ggml
from kvgate.engines.hf.kv_formats.nvfp4 import fake_quantize_nvfp4, global_scale
from kvgate.engines.hf.kv_formats.per_token_head import (
    fp8_per_token_head,
    hadamard_rotation,
    int4_per_token_head,
    int8_per_token_head,
)
from kvgate.engines.llamacpp.kv_types import LAYOUTS


def row(*values: float, d: int = 64) -> torch.Tensor:
    """[1, 1, 1, d]: the values, then zeros."""
    x = torch.zeros(1, 1, 1, d)
    x[0, 0, 0, : len(values)] = torch.tensor(values)
    return x


def head(y: torch.Tensor, k: int) -> list[float]:
    return [round(v, 6) for v in y[0, 0, 0, :k].tolist()]


@pytest.mark.parametrize(
    ("dtype", "values", "expected"),
    [
        # amax 127 → d = 1; round halves away from zero (63.5 → 64, −0.5 → −1)
        ("q8_0", (127, 63.5, -0.5, 0.2), [127, 64, -1, 0]),
        # m = −8 → d = 1; q = min(15, ⌊x + 8.5⌋) − 8 (7.9 saturates at 7)
        ("q4_0", (-8, 4.49, 4.5, 7.9), [-8, 4, 5, 7]),
        # min 0, max 15 → d = 1; q = ⌊x + 0.5⌋
        ("q4_1", (0, 15, 7.5, 7.49), [0, 15, 8, 7]),
        # m = +16 → d = −1; −16 codes ⌊32.5⌋ = 32, clamped to 31: (31 − 16)·(−1) = −15
        ("q5_0", (16, -16, 0.5), [16, -15, 0]),
        # min −1, max 30 → d = 1; q = ⌊x + 1 + 0.5⌋
        ("q5_1", (-1, 30, 0.5, 0), [-1, 30, 1, 0]),
    ],
)
def test_ggml_block_types_by_hand(dtype: str, values: tuple[float, ...], expected: list[float]) -> None:
    y = fake_quantize_ggml(row(*values), dtype)
    assert head(y, len(expected)) == expected
    assert float(y[0, 0, 0, 32:].abs().max()) == 0.0  # an all-zero block stays zero


def test_iq4_nl_by_hand() -> None:
    """One value 127 in a zero block: d = 127/−127 = −1 codes 127 to the table's −127 (index 0) and each
    zero to 1, the value nearest 0 (iq4_nl has no exact zero); zeros weigh 0 in the refit, so
    d = Σw·q·x / Σw·q² = −127/127·… = −1 and x̂ = 127, and every zero reads back as −1."""
    y = fake_quantize_ggml(row(127.0), "iq4_nl")
    assert y[0, 0, 0, 0].item() == 127.0
    assert y[0, 0, 0, 1:32].unique().tolist() == [-1.0]


def _libggml() -> ctypes.CDLL:
    import llama_cpp

    return ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))


@pytest.mark.parametrize("dtype", ["q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"])
def test_ggml_types_equal_libggml(dtype: str) -> None:
    """The simulation is bit-identical to ggml's reference quantiser (what llama.cpp's CPU cache writes
    with) followed by its dequantiser, on the same rows."""
    lib = _libggml()
    x = torch.randn(1, 3, 20, 64, generator=torch.Generator().manual_seed(1)) * 3
    x[0, 1, 2, :32] = 0.0
    rows = x.reshape(-1, 64).contiguous()
    packed = ctypes.create_string_buffer(LAYOUTS[dtype].row_bytes(64) * rows.shape[0])
    quantize = getattr(lib, f"quantize_row_{dtype}_ref")
    dequantize = getattr(lib, f"dequantize_row_{dtype}")
    for function in (quantize, dequantize):
        function.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    quantize(rows.data_ptr(), packed, rows.numel())
    theirs = torch.empty_like(rows)
    dequantize(packed, theirs.data_ptr(), rows.numel())
    assert torch.equal(fake_quantize_ggml(x, dtype).reshape(-1, 64), theirs)


def test_ggml_needs_whole_blocks() -> None:
    with pytest.raises(ValueError, match="not a multiple"):
        fake_quantize_ggml(torch.ones(1, 1, 1, 48), "q4_0")


def test_nvfp4_by_hand() -> None:
    """Tensor amax 6 → g = 1/448. Block 1 (amax 6): scale E4M3(448) = 448, step 1; 1.25 and −0.25 are
    ties that go to the even code (1, 0). Block 2 (all 0.7): scale E4M3(0.7/6·448 = 52.27) = 52 (E4M3
    steps by 4 in [32, 64)), 0.7/(52/448) = 6.03 saturates at 6: x̂ = 6·52/448."""
    x = row(6.0, 3.0, 1.25, -0.25, 0.8)
    x[0, 0, 0, 16:32] = 0.7
    g = global_scale(x)
    assert g.item() == pytest.approx(1 / 448)
    y = fake_quantize_nvfp4(x, g)
    assert head(y, 5) == [6.0, 3.0, 1.0, 0.0, 1.0]
    assert y[0, 0, 0, 16:32].unique().tolist() == [pytest.approx(6 * 52 / 448)]
    assert float(y[0, 0, 0, 32:].abs().max()) == 0.0


def test_nvfp4_keeps_its_tensor_scale_for_appended_entries() -> None:
    """The scale fixed at prefill is returned and reused: an appended entry larger than the prefill's
    amax saturates to ±6·448·g instead of taking a scale of its own."""
    prefill = row(6.0)
    _, g = simulate(prefill, "nvfp4", "block")
    assert g is not None
    appended, again = simulate(row(6000.0), "nvfp4", "block", g)
    assert again is g
    assert appended[0, 0, 0, 0].item() == pytest.approx(6 * 448 * g.item())


def test_int8_per_token_head_by_hand() -> None:
    """amax 1 → s = 1/127; a float stored into int8 truncates: −63.5 → −63, 38.1 → 38."""
    y = int8_per_token_head(row(1.0, -0.5, 0.3))
    assert head(y, 3) == [1.0, round(-63 / 127, 6), round(38 / 127, 6)]


def test_fp8_per_token_head_by_hand() -> None:
    """amax 2 → s = 2/448; 1/s = 224 is an E4M3 value; 0.3/s = 67.2 rounds to 64 (E4M3 steps by 8 in
    [64, 128)). Each token and head has its own scale: the second row, 10× larger, codes alike."""
    x = torch.cat([row(2.0, 1.0, 0.3), row(20.0, 10.0, 3.0)], dim=2)
    y = fp8_per_token_head(x)
    assert [round(v, 6) for v in y[0, 0, 0, :3].tolist()] == [2.0, 1.0, round(64 / 224, 6)]
    assert torch.allclose(y[0, 0, 1, :3], 10 * y[0, 0, 0, :3])


def test_hadamard_rotation_is_orthonormal() -> None:
    r = hadamard_rotation(64)
    assert torch.allclose(r @ r.T, torch.eye(64), atol=1e-6)
    assert torch.allclose(r.abs(), torch.full((64, 64), 1 / 8))
    with pytest.raises(ValueError, match="power of two"):
        hadamard_rotation(48)


def test_int4_per_token_head_by_hand() -> None:
    """A row whose rotation is [c, −c/2, 0, …]: min −c/2, max c → s = c/10, zero point round(5) = 5;
    codes 15, 0, 5 → (q − 5)·s' = c, −c/2, 0 with s' = s carrying 5 in its low mantissa bits; rotated
    back, the row itself (to s' − s, under 2⁻¹⁹ relative)."""
    c = 3.0
    r = hadamard_rotation(64)
    turned = torch.zeros(64)
    turned[0], turned[1] = c, -c / 2
    x = (turned @ r.T).reshape(1, 1, 1, 64)
    y = int4_per_token_head(x)
    stored = ((torch.tensor(c / 10).view(torch.int32) & -16) | 5).view(torch.float32).item()
    expected = (torch.tensor([10 * stored, -5 * stored] + [0.0] * 62) @ r.T).reshape(1, 1, 1, 64)
    assert torch.allclose(y, expected, atol=1e-6)
    assert torch.allclose(y, x, rtol=0, atol=c * 2.0**-18)


def test_int4_per_token_head_error_is_at_most_half_a_step() -> None:
    x = torch.randn(2, 3, 5, 64, generator=torch.Generator().manual_seed(2))
    r = hadamard_rotation(64)
    turned = x @ r
    step = (turned.amax(-1, keepdim=True) - turned.amin(-1, keepdim=True)) / 15
    error = (int4_per_token_head(x) @ r - turned).abs()
    assert bool((error <= step / 2 + 1e-5).all())


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        ("fp8_e4m3", 1.0),
        ("q8_0", 34 / 32),
        ("q4_0", 18 / 32),
        ("q5_1", 24 / 32),
        ("iq4_nl", 18 / 32),
        ("f16", 2.0),
        ("nvfp4", (32 + 4) / 64),
        ("int8_per_token_head", (64 + 4) / 64),
        ("fp8_per_token_head", (64 + 4) / 64),
        ("int4_per_token_head", (32 + 4) / 64),
        ("bfloat16", 4.0),  # not a KV format: the model's own element size
    ],
)
def test_bytes_per_value(dtype: str, expected: float) -> None:
    assert bytes_per_value(dtype, 64, 4) == pytest.approx(expected)


def test_turboquant_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"does not simulate turboquant_k8v4.*--engine vllm"):
        simulate(row(1.0), "turboquant_k8v4", "token")
