"""TensorRT-LLM's `trtllm-serve` as a flavour of the server engine.

trtllm-serve takes its KV cache settings from a YAML file of LLM API options
(`--extra_llm_api_options FILE`, `kv_cache_config`: tensorrt_llm.llmapi.KvCacheConfig):
- `enable_block_reuse` (TensorRT-LLM reuses KV blocks across requests by default): false for the
  control and every arm that may not reuse, true for prefix reuse;
- `dtype`: "auto", or the treatment dtype's TensorRT-LLM name for a quantise arm (`APPLIES.kv_dtypes`:
  fp8 — E4M3 only, one scale per layer —, nvfp4, float16, bfloat16, float32; `KvCacheConfig.dtype`'s
  values, tensorrt_llm/llmapi/llm_args.py); every other dtype refused.
- offload, host, composed with prefix reuse: `host_cache_size` (blocks evicted from the GPU pool are
  copied to host memory, and copied back — onboarded — when a request reuses them) with
  `event_buffer_max_size`, so trtllm-serve keeps its KV cache events, drained by `POST
  /kv_cache_events` (a list of `{event_id, data, window_size}`; tensorrt_llm/_utils.py
  KVCacheEventSerializer). An offloaded block is an `updated` event whose `cache_level` goes from 0
  (primary) to 1 (secondary), an onboarded one from 1 to 0 (batch_manager/kvCacheManager.cpp): those
  are the rows' blocks written to and read back from the tier. Its iteration stats (`kvCacheStats`:
  reusedBlocks, missedBlocks) cannot tell an onboarded block from one reused on the GPU;
- a matrix's `kv_blocks`: `max_tokens` = kv_blocks × `tokens_per_block` (32, written out), the GPU pool
  an offload arm's prompts must overflow for blocks to leave it.
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
    offload_part,
    quantize_part,
    reuse_part,
)
from kvgate.engines.server.response import Completion, MalformedResponse, parse_completion
from kvgate.engines.server.stack_version import VersionAnswer
from kvgate.treatments.spec import Treatment

TOKENS_PER_BLOCK = 32
"""`kv_cache_config.tokens_per_block` (TensorRT-LLM's default), written out with a sized pool."""
HOST_CACHE_BYTES = 1 << 30
"""`host_cache_size` of an offload arm: 1 GiB, the vllm engine's default offload budget."""
EVENT_BUFFER = 1 << 16
"""`event_buffer_max_size` of an offload arm: events kept between two drains (one per measured case)."""
PRIMARY, SECONDARY = 0, 1
"""TensorRT-LLM's cache levels: GPU memory, host memory."""
KV_CACHE_DTYPES = ("auto", "float16", "bfloat16", "float32", "fp8", "fp8_ds_mla", "nvfp4")
"""`KvCacheConfig.dtype`'s values (llm_args.py; fp8_ds_mla is sparse MLA's packed FP8, no treatment's)."""
APPLIES = Applies(
    stack="TensorRT-LLM",
    kinds=("quantize", "reuse", "offload"),
    kv_flag="kv_cache_config.dtype",
    kv_choices=KV_CACHE_DTYPES,
    kv_dtypes={"fp8_e4m3": "fp8", "nvfp4": "nvfp4", "f16": "float16", "bf16": "bfloat16", "f32": "float32"},
    fp8_scales=("tensor",),
    reuse_modes=("prefix",),
    offload_tiers=("host",),
    proof={
        "quantize": "",
        "reuse": "usage.prompt_tokens_details.cached_tokens",
        "offload": "POST /kv_cache_events: updated cache_level 0→1 (written), 1→0 (read)",
    },
    pool=f"kv_cache_config.max_tokens (kv_blocks × {TOKENS_PER_BLOCK} tokens)",
)
REFUSED_KINDS = {
    "eviction": (
        "TensorRT-LLM's max_attention_window keeps a fixed window of recent tokens (its PyTorch backend "
        "ignores sink_token_length), not a share of every prompt: not mapped"
    ),
}

VERSION_ANSWER = VersionAnswer("TensorRT-LLM", "/version", "version")


@dataclass(frozen=True)
class TensorRTLLM:
    name: str
    salted: bool = False
    events_path: str | None = "/kv_cache_events"
    saves_slots: bool = False
    info_path: str | None = None
    """trtllm-serve names no KV dtype in an answer kvgate reads (its /metrics gives block counts)."""
    version_answer: VersionAnswer = VERSION_ANSWER

    def command(self, model: str, host: str, port: int, python: str) -> list[str]:
        return ["trtllm-serve", model, "--host", host, "--port", str(port), "--backend", "pytorch"]

    def launch(self, treatment: Treatment, kv_blocks: int | None = None) -> ArmLaunch:
        quantize = quantize_part(treatment)
        lines = [
            "kv_cache_config:",
            f"  enable_block_reuse: {'true' if reuse_part(treatment) is not None else 'false'}",
            f"  dtype: {APPLIES.kv_dtypes[quantize.dtype] if quantize is not None else 'auto'}",
        ]
        if kv_blocks is not None:
            lines += [
                f"  tokens_per_block: {TOKENS_PER_BLOCK}",
                f"  max_tokens: {kv_blocks * TOKENS_PER_BLOCK}",
            ]
        if offload_part(treatment) is not None:
            lines += [f"  host_cache_size: {HOST_CACHE_BYTES}", f"  event_buffer_max_size: {EVENT_BUFFER}"]
        return ArmLaunch(["--extra_llm_api_options", CONFIG_PLACEHOLDER], "\n".join(lines) + "\n")

    @property
    def applies(self) -> Applies:
        return APPLIES

    def refusal(self, treatment: Treatment) -> str | None:
        refused = kind_refusal(APPLIES, treatment, REFUSED_KINDS)
        if refused:
            return refused
        reuse, offload, quantize = reuse_part(treatment), offload_part(treatment), quantize_part(treatment)
        if reuse is not None and reuse.mode not in APPLIES.reuse_modes:
            return (
                "TensorRT-LLM's block reuse matches token prefixes block by block, not spans at other offsets"
            )
        if offload is not None and reuse is None:
            return (
                "TensorRT-LLM's host_cache_size keeps evicted blocks for reuse and onboards them as reuse "
                "hits: compose offload with prefix reuse"
            )
        if offload is not None and offload.tier not in APPLIES.offload_tiers:
            return (
                "TensorRT-LLM's host_cache_size keeps offloaded blocks in host memory; "
                "a disk tier is not mapped"
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

    def tier_events(self, body: Any) -> tuple[int, int]:
        if not isinstance(body, list):
            raise MalformedResponse("the KV cache events are not a list")
        moves = []
        for event in body:
            data = event.get("data") if isinstance(event, dict) else None
            updated = isinstance(data, dict) and data.get("type") == "updated"
            level = data.get("cache_level") if updated and isinstance(data, dict) else None
            if isinstance(level, dict):
                moves.append((level.get("old_value"), level.get("new_value")))
        return moves.count((PRIMARY, SECONDARY)), moves.count((SECONDARY, PRIMARY))

    def kv_dtype(self, info: Any) -> str | None:
        return None
