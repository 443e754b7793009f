"""fake_quantize: FP8 round trip within the format's bound, zeros, per-token scales, saturation."""

from __future__ import annotations

import pytest
import torch

from kvgate.engines.hf.fp8 import fake_quantize

BOUND = {"fp8_e4m3": 2.0**-4, "fp8_e5m2": 2.0**-3}
SMALLEST_NORMAL = {"fp8_e4m3": 2.0**-6, "fp8_e5m2": 2.0**-14}
FP8_MAX = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0}


@pytest.mark.parametrize("dtype", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize(
    ("scale", "shape"), [("tensor", (1, 1, 1, 1)), ("head", (1, 3, 1, 1)), ("token", (2, 3, 5, 1))]
)
def test_round_trip_within_the_format_bound(dtype: str, scale: str, shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 16) * torch.tensor([1.0, 10.0, 0.1]).view(1, 3, 1, 1)
    y, used = fake_quantize(x, dtype, scale)
    assert used.shape == shape
    assert y.dtype == x.dtype and y.shape == x.shape
    normal = (x / used).abs() >= SMALLEST_NORMAL[dtype]
    error = (y - x).abs()[normal] / x.abs()[normal]
    assert error.max() <= BOUND[dtype]
    assert error.max() > 0  # it did quantise


def test_zeros_stay_zeros_and_keep_dtype() -> None:
    x = torch.zeros(1, 2, 3, 4, dtype=torch.bfloat16)
    x[0, 0, 0, 0] = 3.0
    for scale in ("tensor", "head", "token"):
        y, used = fake_quantize(x, "fp8_e4m3", scale)
        assert y.dtype == torch.bfloat16
        assert torch.equal(y, x)  # 3.0 is exact in E4M3 once scaled to the max, zeros stay zeros
        assert torch.isfinite(used).all() and (used > 0).all()


def test_token_scales_isolate_an_outlier_row() -> None:
    torch.manual_seed(1)
    x = torch.randn(1, 1, 4, 32)
    x[0, 0, 2] *= 1e6
    per_token, used = fake_quantize(x, "fp8_e4m3", "token")
    per_tensor, _ = fake_quantize(x, "fp8_e4m3", "tensor")
    others = [0, 1, 3]
    normal = ((x / used).abs() >= SMALLEST_NORMAL["fp8_e4m3"])[0, 0, others]
    token_error = ((per_token - x).abs() / x.abs())[0, 0, others]
    assert normal.float().mean() > 0.95
    assert token_error[normal].max() <= BOUND["fp8_e4m3"]
    assert ((per_token - x).abs() / x.abs())[0, 0, 2].max() <= BOUND["fp8_e4m3"]
    tensor_error = ((per_tensor - x).abs() / x.abs())[0, 0, others]
    assert tensor_error.median() > 0.5  # one tensor scale flushes the ordinary rows to (nearly) zero


@pytest.mark.parametrize("dtype", ["fp8_e4m3", "fp8_e5m2"])
def test_fixed_scale_saturates(dtype: str) -> None:
    prefill = torch.ones(1, 2, 3, 4)
    _, scale = fake_quantize(prefill, dtype, "head")
    new = torch.tensor([1.0, -5.0, 1e9, -1e9]).view(1, 1, 1, 4).expand(1, 2, 1, 4).contiguous()
    y, used = fake_quantize(new, dtype, "head", fixed_scale=scale)
    assert torch.equal(used, scale)
    assert torch.isfinite(y).all()
    top = FP8_MAX[dtype] * scale[0, 0, 0, 0]
    assert torch.allclose(y[0, 0, 0], torch.tensor([1.0, -1.0 * float(top), float(top), -float(top)]))


def test_empty_and_bad_arguments() -> None:
    y, used = fake_quantize(torch.zeros(1, 2, 0, 4), "fp8_e4m3", "head")
    assert y.shape == (1, 2, 0, 4) and used.shape == (1, 2, 1, 1)
    with pytest.raises(ValueError):
        fake_quantize(torch.zeros(1, 1, 1, 1), "fp8_e4m4", "tensor")
    with pytest.raises(ValueError):
        fake_quantize(torch.zeros(1, 1, 1, 1), "fp8_e4m3", "block")
    with pytest.raises(ValueError):
        fake_quantize(torch.zeros(1, 1, 1), "fp8_e4m3", "tensor")
    with pytest.raises(ValueError):
        fake_quantize(torch.ones(1, 1, 1, 1), "fp8_e4m3", "tensor", fixed_scale=torch.zeros(1, 1, 1, 1))
