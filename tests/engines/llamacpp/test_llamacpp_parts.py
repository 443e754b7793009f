"""The llamacpp engine's parts that need no llama.cpp: the KV types as treatments, the context shift's
plan against the hf reference's StreamingLLM, the counter checks, options and resources."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from kvgate.engines.llamacpp.context_shift import plan_shift
from kvgate.engines.llamacpp.counters import (
    kv_type_contradiction,
    prompt_contradiction,
    state_size_contradiction,
)
from kvgate.engines.llamacpp.kv_types import LAYOUTS, arm_kv_types
from kvgate.engines.options import OWN_OPTIONS, check_engine_options
from kvgate.engines.registry import engine_info
from kvgate.engines.resources import Resources, engine_resources
from kvgate.engines.vllm.args import VLLMPlatform, arm_refusal
from kvgate.errors import BadInput
from kvgate.treatments.matrix import resolve_matrix
from kvgate.treatments.spec import GGML_KV_TYPES, Composite, Eviction, Full, Quantize


@pytest.mark.parametrize("dtype", GGML_KV_TYPES)
def test_every_llama_cpp_cache_type_is_a_treatment_dtype_with_block_scales(dtype: str) -> None:
    treatment = Quantize("q", dtype=dtype)
    assert treatment.scale == "block"
    assert arm_kv_types(treatment) == (dtype, dtype)
    assert LAYOUTS[dtype].row_bytes(192) > 0


def test_k_and_v_take_their_own_types() -> None:
    both = Quantize("kv", dtype="q8_0", dtype_v="q4_0")
    assert arm_kv_types(both) == ("q8_0", "q4_0")
    assert arm_kv_types(Full("full")) == ("f16", "f16")
    assert arm_kv_types(Composite("c", of=(Eviction("e"), both))) == ("q8_0", "q4_0")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dtype": "q3_k"}, "dtype must be one of"),
        ({"dtype": "q8_0", "scale": "head"}, "stores a scale per 32-value block"),
        ({"dtype": "fp8_e4m3", "scale": "block"}, "belongs to the GGML types"),
        ({"dtype": "fp8_e4m3", "dtype_v": "q4_0"}, "dtype_v is V's llama.cpp cache type"),
        ({"dtype": "q8_0", "dtype_v": "fp8_e5m2"}, "dtype_v is V's llama.cpp cache type"),
    ],
)
def test_ill_formed_kv_types_are_refused(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Quantize("q", **kwargs)


def test_fp8_specs_keep_their_fingerprints() -> None:
    """dtype_v unset is left out of the spec, so FP8 arms of earlier runs still resume."""
    spec = Quantize("fp8-e4m3").to_dict()
    assert "dtype_v" not in spec
    assert spec == {
        "kind": "quantize",
        "name": "fp8-e4m3",
        "engine_args": {},
        "dtype": "fp8_e4m3",
        "scale": "tensor",
    }
    assert Quantize("kv", dtype="q8_0", dtype_v="q4_0").to_dict()["dtype_v"] == "q4_0"


@pytest.mark.parametrize("dtype", ["q8_0", "q4_0", "iq4_nl"])
def test_vllm_refuses_llama_cpp_types_in_one_line(dtype: str) -> None:
    platform = VLLMPlatform("cpu", None, {}, frozenset())
    reason = arm_refusal(Quantize("q", dtype=dtype), platform)
    assert reason is not None and dtype in reason and "--engine llamacpp" in reason


def _streaming_kept(n: int, eviction: Eviction) -> list[int]:
    """The positions the hf reference's StreamingLLM keeps of n (its scores, its top-k and tie rule)."""
    torch = pytest.importorskip("torch")
    from kvgate.engines.hf.eviction.base import ScoringInputs, keep_indices, n_keep
    from kvgate.engines.hf.eviction.streaming import StreamingLLM

    keys = torch.zeros(1, 1, n, 2)
    method = StreamingLLM(eviction.ratio, eviction.sink_tokens)
    scores = method.scores(ScoringInputs(keys, keys, keys, 0))
    kept = keep_indices(scores, n_keep(n, eviction.ratio, eviction.convention), eviction.convention)
    return [int(p) for p in kept[0, 0]]


@pytest.mark.parametrize("convention", ["kvgate", "kvpress"])
@pytest.mark.parametrize(("ratio", "sinks"), [(0.5, 4), (0.25, 4), (0.9, 4), (0.5, 0), (0.75, 16)])
def test_the_context_shift_keeps_what_streaming_llm_keeps(ratio: float, sinks: int, convention: str) -> None:
    eviction = Eviction("e", ratio=ratio, sink_tokens=sinks, convention=convention)
    for n in [*range(1, 80), 511, 512, 1023, 1024, 1031]:
        shift = plan_shift(n, eviction)
        assert shift.kept == len(shift.kept_positions())
        if shift.kept <= sinks and convention == "kvgate":
            continue  # only sinks survive: llama.cpp keeps a prefix, the hf reference the later sinks
        assert shift.kept_positions() == _streaming_kept(n, eviction), n


def test_counters_that_contradict_the_arm_are_named() -> None:
    assert prompt_contradiction("full", False, "c1", 100, 0, 100) is None
    assert prompt_contradiction("prefix-reuse", True, "c1", 100, 60, 40) is None
    leak = prompt_contradiction("full", False, "c2", 100, 60, 40)
    assert leak is not None and "KV crossed cases" in leak and "'full'" in leak
    assert "do not add up" in (prompt_contradiction("full", False, "c3", 100, 0, 99) or "")
    assert kv_type_contradiction("q8_0", ("q8_0", "q8_0"), ("q8_0", "q8_0")) is None
    assert "allocated K f16" in (kv_type_contradiction("q8_0", ("q8_0", "q8_0"), ("f16", "f16")) or "")
    assert "did not report" in (kv_type_contradiction("q8_0", ("q8_0", "q8_0"), None) or "")
    assert state_size_contradiction("q", 6120, 6128.0, 64) is None
    assert state_size_contradiction("q", 6120, 11528.0, 64) is not None


def _own_parameters(cls: type) -> tuple[str, ...]:
    params = list(inspect.signature(cls).parameters.values())[1:]  # after the model
    return tuple(p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD)


def test_options_match_the_engine_and_are_checked_by_name() -> None:
    from kvgate.engines.llamacpp.engine import LlamaCppEngine

    assert OWN_OPTIONS["llamacpp"] == _own_parameters(LlamaCppEngine)
    with pytest.raises(BadInput, match="did you mean 'n_ctx'"):
        check_engine_options("llamacpp", {"n_ctxx": 1})


def test_resources_and_registry() -> None:
    assert engine_resources("llamacpp", {"threads": 3}) == Resources(3.0, 0.0)
    assert engine_resources("llamacpp", {"n_gpu_layers": 99}) == Resources(1.0, 1.0)
    assert engine_resources("llamacpp", {"n_gpu_layers": 99}, gpus_available=False) == Resources(1.0, 0.0)
    assert set(engine_info("llamacpp").kinds) >= {"eviction", "quantize", "offload", "reuse"}


def test_the_llamacpp_matrix_names_its_arms() -> None:
    matrix = resolve_matrix("llamacpp")
    assert [t.name for t in matrix.arms()] == [
        "full",
        "q8_0",
        "q4_0",
        "streaming-50",
        "prefix-reuse",
        "offload-host",
    ]
    assert matrix.candidates[0] == Quantize("q8_0", dtype="q8_0")


def test_a_gguf_file_is_a_model_by_path_hashed_without_conversion(tmp_path: Path) -> None:
    from kvgate.models import file_sha256, model_identity, resolve_model

    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    model = resolve_model(str(path))
    assert model.is_gguf() and model.gguf_path() == path.resolve() and model.available()
    assert model_identity(model) == {"name": str(path), "sha256": file_sha256(path), "source": "tiny.gguf"}
    with pytest.raises(BadInput, match=r"nor a \.gguf file"):
        resolve_model(str(tmp_path / "missing.gguf"))


def test_the_proof_of_treatment_takes_ggml_block_types() -> None:
    from kvgate.report.analysis.proof import quantised

    assert quantised("q8_0") and quantised("q4_0") and quantised("q8_0+q4_0") and quantised("f16+q4_0")
    assert quantised("fp8_e4m3") and not quantised("f16") and not quantised("bfloat16")
