"""`-E device=` names a device this machine's torch has, or is refused in one line before the model is
loaded (moving the model to CUDA on a CPU build of torch was an internal error, exit 70)."""

from __future__ import annotations

import pytest
import torch

from kvgate.engines.hf.engine import HFEngine
from kvgate.errors import BadInput
from kvgate.models import ModelSpec

NO_MODEL = ModelSpec(name="absent", description="never loaded", folder=None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with a GPU has cuda")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:9"])
def test_cuda_without_a_gpu_is_refused(device: str) -> None:
    with pytest.raises(
        BadInput, match=rf"device '{device}', but torch here sees 0 CUDA device\(s\): use -E device=cpu"
    ):
        HFEngine(NO_MODEL, device=device, linear="torch", attention="sdpa")


def test_a_gpu_beyond_those_present_is_refused() -> None:
    beyond = f"cuda:{torch.cuda.device_count()}"
    with pytest.raises(BadInput, match="CUDA device"):
        HFEngine(NO_MODEL, device=beyond, linear="torch", attention="sdpa")


@pytest.mark.parametrize("device", ["tpu", "", 5, "cpu:x"])
def test_a_name_that_is_no_device_is_refused(device: object) -> None:
    with pytest.raises(BadInput, match="hf engine: device must be cpu, cuda, cuda:N or mps"):
        HFEngine(NO_MODEL, device=device, linear="torch", attention="sdpa")  # type: ignore[arg-type]
