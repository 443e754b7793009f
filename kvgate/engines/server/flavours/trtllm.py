"""TensorRT-LLM's `trtllm-serve` as a flavour of the server engine.

trtllm-serve takes its KV cache settings from a YAML file of LLM API options
(`--extra_llm_api_options FILE`, `kv_cache_config`: tensorrt_llm.llmapi.KvCacheConfig):
- `enable_block_reuse` (TensorRT-LLM reuses KV blocks across requests by default): false for the
  control and every arm that may not reuse, true for prefix reuse;
- `dtype`: "auto", or the treatment dtype's TensorRT-LLM name for a quantise arm (`APPLIES.kv_dtypes`:
  fp8 — E4M3 only, one scale per layer —, nvfp4, float16, bfloat16, float32; `KvCacheConfig.dtype`'s
  values, tensorrt_llm/llmapi/llm_args.py); every other dtype refused.
Offload is refused: `host_cache_size` keeps blocks evicted from the GPU pool in host memory and brings
them back as reuse hits, but no counter trtllm-serve answers tells such a block from one reused on the
GPU (its iteration stats' `kvCacheStats` count reusedBlocks and missedBlocks only), so an offload arm
could never show its proof.
Requests go to `/v1/completions` (prompt as token ids); its answer has vLLM's shape (tensorrt_llm/serve/
openai_protocol.py): `choices[0].token_ids`, `usage.prompt_tokens`, `usage.prompt_tokens_details.
cached_tokens`. Not run here: TensorRT-LLM needs an NVIDIA GPU; whether an aggregated server fills
`token_ids` was not checked, and an answer without them is refused as malformed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvgate.engines.server.flavours.applies import Applies, kind_refusal
from kvgate.engines.server.flavours.base import (
    CONFIG_PLACEHOLDER,
    ArmLaunch,
    engine_args_refusal,
    quantize_part,
    reuse_part,
)
from kvgate.engines.server.response import Completion, parse_completion
from kvgate.treatments.spec import Treatment

KV_CACHE_DTYPES = ("auto", "float16", "bfloat16", "float32", "fp8", "fp8_ds_mla", "nvfp4")
"""`KvCacheConfig.dtype`'s values (llm_args.py; fp8_ds_mla is sparse MLA's packed FP8, no treatment's)."""
APPLIES = Applies(
    stack="TensorRT-LLM",
    kinds=("quantize", "reuse"),
    kv_flag="kv_cache_config.dtype",
    kv_choices=KV_CACHE_DTYPES,
    kv_dtypes={"fp8_e4m3": "fp8", "nvfp4": "nvfp4", "f16": "float16", "bf16": "bfloat16", "f32": "float32"},
    fp8_scales=("tensor",),
    reuse_modes=("prefix",),
    offload_tiers=(),
    proof={"quantize": "", "reuse": "usage.prompt_tokens_details.cached_tokens"},
)
REFUSED_KINDS = {
    "eviction": (
        "TensorRT-LLM's max_attention_window keeps a fixed window of recent tokens (its PyTorch backend "
        "ignores sink_token_length), not a share of every prompt: not mapped"
    ),
    "offload": (
        "TensorRT-LLM's host_cache_size brings blocks back from host memory as reuse hits, but no counter "
        "trtllm-serve answers tells them from blocks reused on the GPU (kvCacheStats: reusedBlocks, "
        "missedBlocks): an offload arm could not be proven; run offload with --engine vllm or hf"
    ),
}


@dataclass(frozen=True)
class TensorRTLLM:
    name: str
    salted: bool = False
    saves_slots: bool = False
    info_path: str | None = None
    """trtllm-serve names no KV dtype in an answer kvgate reads (its /metrics gives block counts)."""

    def command(self, model: str, host: str, port: int, python: str) -> list[str]:
        return ["trtllm-serve", model, "--host", host, "--port", str(port), "--backend", "pytorch"]

    def launch(self, treatment: Treatment) -> ArmLaunch:
        quantize = quantize_part(treatment)
        lines = [
            "kv_cache_config:",
            f"  enable_block_reuse: {'true' if reuse_part(treatment) is not None else 'false'}",
            f"  dtype: {APPLIES.kv_dtypes[quantize.dtype] if quantize is not None else 'auto'}",
        ]
        return ArmLaunch(["--extra_llm_api_options", CONFIG_PLACEHOLDER], "\n".join(lines) + "\n")

    @property
    def applies(self) -> Applies:
        return APPLIES

    def refusal(self, treatment: Treatment) -> str | None:
        refused = kind_refusal(APPLIES, treatment, REFUSED_KINDS)
        if refused:
            return refused
        reuse, quantize = reuse_part(treatment), quantize_part(treatment)
        if reuse is not None and reuse.mode not in APPLIES.reuse_modes:
            return (
                "TensorRT-LLM's block reuse matches token prefixes block by block, not spans at other offsets"
            )
        if quantize is not None and (refused := APPLIES.dtype_refusal(quantize)):
            return refused
        return engine_args_refusal(treatment, self.name, "writes its own kv_cache_config")

    def request(
        self, model_id: str, prompt: list[int], max_tokens: int, salt: str, measured: bool, reuse: bool
    ) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": model_id,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0.0,
        }
        if measured:
            body["logprobs"] = 1
        return "/v1/completions", body

    def parse(self, body: Any, n_prompt: int) -> Completion:
        return parse_completion(body, n_prompt)

    def kv_dtype(self, info: Any) -> str | None:
        return None
