"""Keep triton out of a process whose torch has no GPU to run it on.

transformers imports `torch._dynamo` when its models load (its attention masks and its continuous-batching
cache need it at module level), and `torch._dynamo` imports triton whenever the package is installed
(it comes with vLLM's dependencies) only to note its types. Triton compiles GPU kernels; with no CUDA,
ROCm or XPU device torch never calls it, yet importing it cost ≈0.2 s per process. Marking the module
absent (`sys.modules["triton"] = None`, Python's own way to make an import fail) makes torch — and vLLM,
which on CPU disables triton anyway — take their no-triton paths, as on a machine without the package.

sympy cannot be kept out so: it is imported unconditionally by `torch.fx.experimental.symbolic_shapes`
(torch 2.13, symbolic_shapes.py:3), and transformers 5.19 reaches that module by two paths every causal
model loads, neither with a switch nor an optional import kvgate could honestly mark absent:

- `transformers/generation/utils.py:48` imports `masking_utils`, whose line 43 imports
  `torch._dynamo._trace_wrapped_higher_order_op` behind a torch ≥ 2.6 version check alone; the package
  `torch/_dynamo/__init__.py:13` → `aot_compile.py:21` → `convert_frame.py:145` → `symbolic_convert.py:97`
  → `exc.py:46` → `utils.py:68` imports symbolic_shapes.
- `transformers/modeling_utils.py:60` imports `distributed/tensor_parallel.py`, which at line 42 imports
  `torch.distributed.tensor` when `torch.distributed.is_available()` (a property of how torch was built,
  true for its CPU wheels; `utils/import_utils.py:269`); `torch/distributed/tensor/__init__.py:4` →
  `_ops` → … → `_collective_utils.py:28` imports symbolic_shapes.

Marking sympy absent would make those imports fail, not take another path. scipy, which transformers
imports only behind its own availability check, is kept out by `scipy_guard`.
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
