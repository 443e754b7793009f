"""TensorRT-LLM's `trtllm-serve` as a flavour of the server engine.

trtllm-serve takes its KV cache settings from a YAML file of LLM API options
(`--extra_llm_api_options FILE`, `kv_cache_config`: tensorrt_llm.llmapi.KvCacheConfig):
- `enable_block_reuse` (TensorRT-LLM reuses KV blocks across requests by default): false for the
  control and every arm that may not reuse, true for prefix reuse;
- `dtype`: "auto", or "fp8" / "nvfp4" for a quantise arm (FP8 E4M3 only: one scale per layer);
- `host_cache_size` (bytes): blocks evicted from the GPU pool kept in host memory and brought back as
  reuse hits, for offload composed with prefix reuse.
Requests go to `/v1/completions` (prompt as token ids); its answer has vLLM's shape (tensorrt_llm/serve/
openai_protocol.py): `choices[0].token_ids`, `usage.prompt_tokens`, `usage.prompt_tokens_details.
cached_tokens`. Not run here: TensorRT-LLM needs an NVIDIA GPU; whether an aggregated server fills
`token_ids` was not checked, and an answer without them is refused as malformed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvgate.engines.server.flavours.base import (
    CONFIG_PLACEHOLDER,
    ArmLaunch,
    engine_args_refusal,
    kinds,
    offload_part,
    quantize_part,
    reuse_part,
)
from kvgate.engines.server.response import Completion, parse_completion
from kvgate.treatments.spec import Treatment

KV_DTYPES = {"fp8_e4m3": "fp8", "nvfp4": "nvfp4"}
"""Treatment dtypes → `kv_cache_config.dtype`."""
HOST_CACHE_BYTES = 1 << 30
"""`host_cache_size` of an offload arm: 1 GiB, the vllm engine's default offload budget."""


@dataclass(frozen=True)
class TensorRTLLM:
    name: str
    salted: bool = False
    info_path: str | None = None
    """trtllm-serve names no KV dtype in an answer kvgate reads (its /metrics gives block counts)."""

    def command(self, model: str, host: str, port: int, python: str) -> list[str]:
        return ["trtllm-serve", model, "--host", host, "--port", str(port), "--backend", "pytorch"]

    def launch(self, treatment: Treatment) -> ArmLaunch:
        quantize = quantize_part(treatment)
        lines = [
            "kv_cache_config:",
            f"  enable_block_reuse: {'true' if reuse_part(treatment) is not None else 'false'}",
            f"  dtype: {KV_DTYPES[quantize.dtype] if quantize is not None else 'auto'}",
        ]
        if offload_part(treatment) is not None:
            lines.append(f"  host_cache_size: {HOST_CACHE_BYTES}")
        return ArmLaunch(["--extra_llm_api_options", CONFIG_PLACEHOLDER], "\n".join(lines) + "\n")

    def refusal(self, treatment: Treatment) -> str | None:
        if "eviction" in kinds(treatment):
            return (
                "TensorRT-LLM's max_attention_window and sink_token_length keep a fixed window while "
                "decoding, not a share of every prompt: not mapped"
            )
        reuse, offload, quantize = reuse_part(treatment), offload_part(treatment), quantize_part(treatment)
        if reuse is not None and reuse.mode == "span":
            return (
                "TensorRT-LLM's block reuse matches token prefixes block by block, not spans at other offsets"
            )
        if offload is not None and reuse is None:
            return (
                "TensorRT-LLM's host_cache_size keeps evicted blocks for reuse: compose offload with prefix "
                "reuse"
            )
        if offload is not None and offload.tier == "disk":
            return (
                "a disk tier is not mapped for TensorRT-LLM here; host_cache_size keeps blocks in host memory"
            )
        if quantize is not None and quantize.dtype not in KV_DTYPES:
            return f"TensorRT-LLM's kv_cache_config.dtype takes auto, fp8, nvfp4: not {quantize.dtype}"
        if quantize is not None and quantize.scale not in ("tensor", "block"):
            return f"TensorRT-LLM scales FP8 KV per layer, not per {quantize.scale}"
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
