"""Each server flavour's table (flavours/applies.py): every treatment dtype mapped to the value the stack's
own flag or config field takes, or refused in one line naming the stack and what it takes; and each
kind, reuse mode and offload tier refused exactly where the table says the stack does not apply it."""

from __future__ import annotations

import pytest

from kvgate.engines.server.flavours.registry import FLAVOURS
from kvgate.treatments.spec import (
    GGML_KV_TYPES,
    KINDS,
    KV_DTYPES,
    REUSE_MODES,
    TIERS,
    Composite,
    Eviction,
    Offload,
    Quantize,
    Reuse,
    Treatment,
)

STACK_NAMES = {
    # SGLang's --kv-cache-dtype (python/sglang/srt/server_args.py)
    "sglang": {"fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "nvfp4": "nvfp4", "bf16": "bf16"},
    # TensorRT-LLM's kv_cache_config.dtype (tensorrt_llm/llmapi/llm_args.py, KvCacheConfig.dtype)
    "trtllm": {"fp8_e4m3": "fp8", "nvfp4": "nvfp4", "f16": "float16", "bf16": "bfloat16", "f32": "float32"},
    # llama-server's --cache-type-k / --cache-type-v (llama.cpp common/arg.cpp)
    "llama-server": {t: t for t in GGML_KV_TYPES},
}
"""What each stack is given for each treatment dtype it stores, written from the stacks' code."""


def _launched_value(flavour: str, treatment: Quantize) -> str:
    launch = FLAVOURS[flavour].launch(treatment)
    if flavour == "trtllm":
        (line,) = [x for x in (launch.config or "").splitlines() if x.strip().startswith("dtype:")]
        return line.split(":", 1)[1].strip()
    flag = "--cache-type-k" if flavour == "llama-server" else "--kv-cache-dtype"
    value = launch.flags[launch.flags.index(flag) + 1]
    if flavour == "llama-server":
        assert launch.flags[launch.flags.index("--cache-type-v") + 1] == value
    return value


@pytest.mark.parametrize("dtype", KV_DTYPES)
@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_every_dtype_is_mapped_or_refused_in_one_line(flavour: str, dtype: str) -> None:
    treatment = Quantize("q", dtype=dtype)
    reason = FLAVOURS[flavour].refusal(treatment)
    expected = STACK_NAMES[flavour].get(dtype)
    if expected is not None:
        assert reason is None
        assert _launched_value(flavour, treatment) == expected
        return
    applies = FLAVOURS[flavour].applies
    assert reason is not None and "\n" not in reason
    assert reason.startswith(f"{applies.stack}'s {applies.kv_flag} takes ") and dtype in reason
    assert all(choice in reason for choice in applies.kv_choices)


def test_the_tables_are_the_stacks_names() -> None:
    assert {f: dict(FLAVOURS[f].applies.kv_dtypes) for f in FLAVOURS} == STACK_NAMES


def test_fp8_scales_other_than_per_layer_are_refused() -> None:
    for flavour in ("sglang", "trtllm"):
        reason = FLAVOURS[flavour].refusal(Quantize("q", dtype="fp8_e4m3", scale="token"))
        assert reason is not None and "per layer" in reason


def _probe(kind: str, tier: str = "host") -> Treatment:
    """A treatment of `kind` the stack takes if it applies the kind at all (offload composed with reuse)."""
    reuse = Reuse("r")
    return {
        "eviction": Eviction("e"),
        "quantize": Quantize("q", dtype="bf16"),
        "offload": Composite("ro", of=(reuse, Offload("o", tier=tier))),
        "reuse": reuse,
    }[kind]


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_each_kind_mode_and_tier_is_refused_where_the_table_says(flavour: str) -> None:
    applies, refusal = FLAVOURS[flavour].applies, FLAVOURS[flavour].refusal
    for kind in KINDS:
        if kind in ("full", "composite"):
            continue
        tier = applies.offload_tiers[0] if applies.offload_tiers else "host"
        assert (refusal(_probe(kind, tier=tier)) is None) == (kind in applies.kinds), kind
    for mode in REUSE_MODES:
        assert (refusal(Reuse("r", mode=mode)) is None) == (mode in applies.reuse_modes), mode
    for tier in TIERS:
        offload = refusal(_probe("offload", tier=tier))
        assert (offload is None) == (tier in applies.offload_tiers), tier
        assert offload is None or "\n" not in offload
    assert set(applies.proof) == set(applies.kinds)  # every applied kind says what proves it
