"""Every KV dtype a treatment may name is, per engine, mapped to that engine's own setting or refused in
one line naming the dtype (treatments.spec.KV_DTYPES): the hf reference simulates all but TurboQuant,
vLLM takes its own names (refused on CPU, whose attention stores FP8 only) and refuses llama.cpp's,
llama.cpp takes only its own."""

from __future__ import annotations

import pytest

from kvgate.engines.vllm.args import (
    CPU_KV_DTYPES,
    VLLMPlatform,
    arm_engine_args,
    arm_refusal,
    cpu_kv_dtype_refusals,
)
from kvgate.treatments.spec import (
    FP8_DTYPES,
    GGML_KV_TYPES,
    KV_DTYPES,
    NATIVE_SCALE,
    TURBOQUANT_DTYPES,
    VLLM_KV_DTYPES,
    Quantize,
)

GPU = VLLMPlatform("cuda", None, {}, frozenset({"kv_cache_dtype"}))
CPU = VLLMPlatform("cpu", None, cpu_kv_dtype_refusals(), frozenset())


def one_line(reason: str | None, dtype: str) -> bool:
    return reason is not None and dtype in reason and "\n" not in reason


@pytest.mark.parametrize("dtype", KV_DTYPES)
def test_hf_simulates_every_dtype_but_turboquant(dtype: str) -> None:
    pytest.importorskip("transformers")
    from kvgate.engines.hf.engine import HFEngine

    engine = object.__new__(HFEngine)  # the refusal reads the treatment alone: no model needed
    reason = engine.refusal(Quantize("q", dtype=dtype))
    if dtype in TURBOQUANT_DTYPES:
        assert one_line(reason, dtype) and "--engine vllm" in (reason or "")
    else:
        assert reason is None


@pytest.mark.parametrize("dtype", KV_DTYPES)
def test_vllm_maps_its_own_dtypes_and_refuses_the_rest(dtype: str) -> None:
    arm = Quantize("q", dtype=dtype)
    reason = arm_refusal(arm, GPU)
    if dtype in GGML_KV_TYPES:
        assert one_line(reason, dtype) and "--engine llamacpp" in (reason or "")
        return
    assert reason is None
    assert arm_engine_args(arm)["kv_cache_dtype"] == dtype
    on_cpu = arm_refusal(arm, CPU)
    if dtype in CPU_KV_DTYPES:
        assert on_cpu is None
    else:
        assert one_line(on_cpu, dtype) and "CPU attention" in (on_cpu or "")


def test_the_cpu_list_is_vllms_own() -> None:
    """The launched server's CPU list (quoted) is what the installed vLLM's CPU backend lists."""
    cpu_attn = pytest.importorskip("vllm.v1.attention.backends.cpu_attn")
    assert list(CPU_KV_DTYPES) == list(cpu_attn.CPUAttentionBackend.supported_kv_cache_dtypes)
    assert all(d in cpu_kv_dtype_refusals() for d in VLLM_KV_DTYPES)


def test_vllm_refuses_engine_args_naming_another_dtype() -> None:
    arm = Quantize("q", dtype="nvfp4", engine_args={"kv_cache_dtype": "int8_per_token_head"})
    assert "contradicts the treatment's dtype 'nvfp4'" in (arm_refusal(arm, GPU) or "")


@pytest.mark.parametrize("dtype", [*FP8_DTYPES, *VLLM_KV_DTYPES])
def test_llama_cpp_refuses_every_dtype_not_its_own(dtype: str) -> None:
    pytest.importorskip("llama_cpp")
    from kvgate.engines.llamacpp.engine import LlamaCppEngine

    engine = object.__new__(LlamaCppEngine)  # the type check reads the treatment alone
    assert one_line(engine.refusal(Quantize("q", dtype=dtype)), dtype)


@pytest.mark.parametrize(("dtype", "scale"), [("nvfp4", "block"), ("int8_per_token_head", "token")])
def test_each_new_dtype_has_the_one_scale_its_format_defines(dtype: str, scale: str) -> None:
    assert NATIVE_SCALE[dtype] == scale
    assert Quantize("q", dtype=dtype).scale == scale  # the default "tensor" is read as it
    with pytest.raises(ValueError, match="is FP8's"):
        Quantize("q", dtype=dtype, scale="head")
    with pytest.raises(ValueError, match="belongs to the GGML types and NVFP4"):
        Quantize("q", dtype="fp8_e4m3", scale="block")
