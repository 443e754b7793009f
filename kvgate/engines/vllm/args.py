"""What an arm asks of vLLM: its engine arguments, in vLLM's own names, or why vLLM cannot apply it.

- full (the control): `kv_cache_dtype="auto"`, `enable_prefix_caching=False` (vLLM turns prefix caching
  on by default; the control and every arm that may not reuse must not serve one request from another's
  KV).
- quantize: `kv_cache_dtype` = the treatment's dtype: FP8 (`fp8_e4m3` | `fp8_e5m2`; engine_args may say
  `fp8`, vLLM's alias of e4m3), where vLLM scales each layer's K and V by one float (`k_scale`,
  `v_scale`: 1.0 unless the checkpoint carries calibrated scales), so only `scale = "tensor"` is
  applicable; or one of vLLM's newer cache dtypes under its own name (treatments.spec.VLLM_KV_DTYPES:
  `int8_per_token_head`, `int4_per_token_head`, `fp8_per_token_head`, `nvfp4`, `turboquant_*`), each
  with the scales its format defines. vLLM's CPU attention backend stores FP8 only
  (CPU_KV_DTYPES); llama.cpp's GGML types are not vLLM's.
- reuse, mode "prefix": `enable_prefix_caching=True`. Span (position-independent) reuse is not in
  mainline vLLM.
- offload, tier "host": vLLM's native CPU offload (`kv_offloading_size`, GiB), or any
  `kv_transfer_config` given in engine_args. vLLM brings offloaded blocks back only as prefix-cache hits,
  so offload applies only composed with prefix reuse; CUDA-alike and XPU GPUs only.
- eviction: refused; mainline vLLM has no KV eviction.

A treatment's `engine_args` (and those of a composite's parts) are merged last; they may refine an arm
(e.g. `num_gpu_blocks_override` for a small GPU budget) but never contradict its kind.

`base_engine_args` (what every arm shares) and `arm_args` (an arm's whole set) serve both the in-process
`vllm` engine and the `vllm serve` command the `server` engine launches, so both run an arm alike.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from kvgate.treatments.spec import (
    FP8_DTYPES,
    VLLM_KV_DTYPES,
    Offload,
    Quantize,
    Reuse,
    Treatment,
)

ARM_KEYS = frozenset({"kv_cache_dtype", "enable_prefix_caching", "kv_offloading_size", "kv_transfer_config"})
"""Engine arguments that only a treatment sets: they are what makes an arm differ from the control."""
KV_DTYPE_NAMES = {
    "fp8_e4m3": ("fp8_e4m3", "fp8"),
    "fp8_e5m2": ("fp8_e5m2",),
    **{d: (d,) for d in VLLM_KV_DTYPES},
}
"""The `kv_cache_dtype` names vLLM accepts for each treatment dtype it can store."""
CPU_KV_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
"""vLLM's CPU attention backend's KV cache dtypes (`CPUAttentionBackend.supported_kv_cache_dtypes`,
vllm 0.32), quoted for a launched server on CPU; the in-process engine asks vLLM itself."""
NO_EVICTION = "mainline vLLM has no KV eviction"
NO_SPAN_REUSE = (
    "vLLM's prefix caching reuses only identical token prefixes; span reuse is not in mainline vLLM"
)
OFFLOAD_NEEDS_REUSE = (
    "vLLM loads offloaded KV back only as a prefix-cache hit: compose offload with prefix reuse "
    '(kind = "composite", of = ["prefix-reuse", "offload-host"])'
)
OFFLOAD_ON_CPU = "CPU Offloading is currently only supported on CUDA-alike and XPU GPUs"
"""vLLM's own words (vllm/v1/kv_offload/cpu/spec.py, 0.32), raised when the worker starts; quoted here so
the arm is refused before a start that would take a minute to fail."""
DEFAULT_OFFLOAD_GIB = 1.0
DTYPES = ("float32", "bfloat16", "float16")
CPU_KV_BYTES = 1 << 30
KV_BLOCKS_ARG = "num_gpu_blocks_override"
"""The argument that sizes an arm's KV pool in blocks (a matrix's `kv_blocks`: pressure)."""


def base_engine_args(
    on_cpu: bool, dtype: str | None, enforce_eager: bool | None, block_size: int | None
) -> dict[str, Any]:
    """What every arm of a run shares: float32, eager, block size 128 and a 1 GiB KV budget on CPU
    (VLLM_CPU_KVCACHE_SPACE wins when set); bfloat16, compiled, block size 16 on GPU; seed 0."""
    if dtype is not None and dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    args: dict[str, Any] = {
        "dtype": dtype or ("float32" if on_cpu else "bfloat16"),
        "enforce_eager": on_cpu if enforce_eager is None else bool(enforce_eager),
        "block_size": int(block_size or (128 if on_cpu else 16)),
        "seed": 0,
    }
    if on_cpu and "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
        args["kv_cache_memory_bytes"] = CPU_KV_BYTES
    return args


def arm_args(
    base: dict[str, Any], treatment: Treatment, offload_gib: float, kv_blocks: int | None = None
) -> dict[str, Any]:
    """An arm's whole set of engine arguments: the run's, the treatment's, and its KV pool size. A pool of
    `kv_blocks` holds one request of at most (kv_blocks − 1) × block_size tokens (vLLM keeps one block
    back as its null block), so that is its max_model_len unless the run sets one: vLLM refuses to start
    when one request of max_model_len cannot fit."""
    args = {**base, **arm_engine_args(treatment, offload_gib)}
    if kv_blocks is not None:
        args[KV_BLOCKS_ARG] = kv_blocks
        args.setdefault("max_model_len", max(1, kv_blocks - 1) * int(args.get("block_size") or 16))
    return args


@dataclass(frozen=True)
class VLLMPlatform:
    """What this machine's vLLM can do, learnt once from vLLM itself.

    `offload_refusal`: why native KV offload cannot run here (None on CUDA-alike and XPU GPUs).
    `kv_dtype_refusals`: vLLM's reason per KV cache dtype it cannot run here (absent when it can).
    `arg_names`: every `vllm.EngineArgs` field.
    """

    device: str
    offload_refusal: str | None
    kv_dtype_refusals: dict[str, str]
    arg_names: frozenset[str]


def arm_engine_args(treatment: Treatment, offload_gib: float = DEFAULT_OFFLOAD_GIB) -> dict[str, Any]:
    """The vLLM engine arguments that make this arm what its treatment says (merged engine_args last)."""
    args: dict[str, Any] = {"kv_cache_dtype": "auto", "enable_prefix_caching": False}
    parts = treatment.parts()
    for part in parts:
        if isinstance(part, Quantize):
            args["kv_cache_dtype"] = part.dtype
        elif isinstance(part, Reuse):
            args["enable_prefix_caching"] = True
        elif isinstance(part, Offload) and "kv_transfer_config" not in part.engine_args:
            args["kv_offloading_size"] = offload_gib
    for source in _with_engine_args(treatment):
        args.update(source.engine_args)
    return args


def _with_engine_args(treatment: Treatment) -> tuple[Treatment, ...]:
    """The parts, then the composite itself: everything that may carry engine_args, in merge order."""
    parts = treatment.parts()
    return parts if len(parts) == 1 and parts[0] is treatment else (*parts, treatment)


def arm_refusal(treatment: Treatment, platform: VLLMPlatform) -> str | None:
    """Why vLLM on this machine cannot apply `treatment` (a composite: if any part is refused), or None."""
    parts = treatment.parts()
    kinds = {p.kind for p in parts}
    for part in parts:
        reason = _part_refusal(part, platform)
        if reason:
            return reason if part is treatment else f"part {part.name!r}: {reason}"
    if "offload" in kinds and "reuse" not in kinds:
        return OFFLOAD_NEEDS_REUSE
    given = {key for source in _with_engine_args(treatment) for key in source.engine_args}
    unknown = sorted(given - platform.arg_names)
    if unknown:
        return f"engine_args {', '.join(repr(k) for k in unknown)} are not vLLM engine arguments"
    return _args_refusal(arm_engine_args(treatment), parts, platform)


def _part_refusal(part: Treatment, platform: VLLMPlatform) -> str | None:
    if part.kind == "eviction":
        return NO_EVICTION
    if isinstance(part, Reuse) and part.mode == "span":
        return NO_SPAN_REUSE
    if isinstance(part, Offload):
        if platform.offload_refusal:
            return f"vLLM says: {platform.offload_refusal}"
        if part.tier == "disk" and "kv_transfer_config" not in part.engine_args:
            return "vLLM's native offload keeps KV in host memory; a disk tier needs a kv_transfer_config"
    if isinstance(part, Quantize) and (refused := kv_dtype_refusal(part.dtype)):
        return refused
    if isinstance(part, Quantize) and part.dtype in FP8_DTYPES and part.scale != "tensor":
        return f"vLLM scales FP8 KV per layer (one k_scale, one v_scale), not per {part.scale}"
    return None


def _args_refusal(args: dict[str, Any], parts: tuple[Treatment, ...], platform: VLLMPlatform) -> str | None:
    """Why the arm's merged arguments cannot run: engine_args that contradict its kind, or a KV dtype
    vLLM cannot run on this machine."""
    kinds = {p.kind for p in parts}
    quantize = next((p for p in parts if isinstance(p, Quantize)), None)
    dtype = args["kv_cache_dtype"]
    if quantize is None and dtype != "auto":
        return f"engine_args kv_cache_dtype={dtype!r} on an arm that does not quantise the KV cache"
    if quantize is not None and dtype not in KV_DTYPE_NAMES[quantize.dtype]:
        return f"engine_args kv_cache_dtype={dtype!r} contradicts the treatment's dtype {quantize.dtype!r}"
    if bool(args["enable_prefix_caching"]) != ("reuse" in kinds):
        state = "on" if args["enable_prefix_caching"] else "off"
        return f"engine_args turn prefix caching {state}, which contradicts the arm's kind"
    offload_keys = sorted(k for k in ("kv_offloading_size", "kv_transfer_config") if k in args)
    if offload_keys and "offload" not in kinds:
        return f"engine_args {', '.join(offload_keys)} on an arm that does not offload"
    if dtype in platform.kv_dtype_refusals:
        return f"vLLM says: {platform.kv_dtype_refusals[dtype]}"
    return None


def kv_dtype_refusal(dtype: str, on_cpu: bool = False) -> str | None:
    """Why vLLM cannot store a treatment dtype (on CPU: its CPU attention backend), or None; the
    arm's checks and `kvgate engines` both ask this."""
    if dtype not in KV_DTYPE_NAMES:  # the treatment dtypes vLLM has no name for are llama.cpp's
        return f"vLLM's KV cache dtypes do not include {dtype}, a llama.cpp type: --engine llamacpp"
    if on_cpu and not set(KV_DTYPE_NAMES[dtype]) & set(CPU_KV_DTYPES):
        return cpu_kv_dtype_refusal(dtype)
    return None


def cpu_kv_dtype_refusal(dtype: str) -> str:
    """vLLM's CPU attention backend's refusal of a KV cache dtype it does not list, in one line."""
    return (
        f"vLLM's CPU attention backend stores KV as {', '.join(CPU_KV_DTYPES)}, not {dtype}: "
        "run it on a GPU, or on --engine hf (its simulation)"
    )


def cpu_kv_dtype_refusals() -> dict[str, str]:
    """The refusal of each of vLLM's newer KV dtypes on CPU (a launched server's, from CPU_KV_DTYPES)."""
    return {d: reason for d in KV_DTYPE_NAMES if (reason := kv_dtype_refusal(d, on_cpu=True))}
