"""Keep triton out of a process whose torch has no GPU to run it on.

transformers imports `torch._dynamo` when its models load (its attention masks and its continuous-batching
cache need it at module level), and `torch._dynamo` imports triton whenever the package is installed
(it comes with vLLM's dependencies) only to note its types. Triton compiles GPU kernels; with no CUDA,
ROCm or XPU device torch never calls it, yet importing it cost ≈0.2 s per process. Marking the module
absent (`sys.modules["triton"] = None`, Python's own way to make an import fail) makes torch — and vLLM,
which on CPU disables triton anyway — take their no-triton paths, as on a machine without the package.

sympy is still imported: `torch._dynamo` itself needs it (torch.fx's symbolic shapes), and so does
`torch.distributed.tensor`, which transformers imports at module level; neither has a setting to skip.
"""

from __future__ import annotations

import sys

import torch


def gpu_visible() -> bool:
    """Whether torch can reach a device triton compiles for (CUDA or ROCm, XPU)."""
    if torch.cuda.is_available():
        return True
    xpu = getattr(torch, "xpu", None)
    return bool(xpu is not None and xpu.is_available())


def hide_triton_without_gpu() -> bool:
    """Mark triton absent unless a GPU is visible or it is already imported; True when it was hidden."""
    if "triton" in sys.modules or gpu_visible():
        return sys.modules.get("triton", 0) is None
    sys.modules["triton"] = None  # type: ignore[assignment]
    return True
