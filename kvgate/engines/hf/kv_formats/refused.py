"""The treatment dtypes the hf reference does not simulate, each refused in one line (torch-free: the
engine's check and `kvgate engines` both read it)."""

from __future__ import annotations

from kvgate.treatments.spec import TURBOQUANT_DTYPES

REFUSED = {
    d: f"the hf engine does not simulate {d} (TurboQuant's rotated Lloyd-Max codes): run it on --engine vllm"
    for d in TURBOQUANT_DTYPES
}


def kv_dtype_refusal(dtype: str, on_cpu: bool = False) -> str | None:
    """Why the hf engine cannot simulate `dtype` (the same on CPU and GPU), or None."""
    return REFUSED.get(dtype)
