"""SGLang (`python -m sglang.launch_server`) as a flavour of the server engine.

Flags per arm (SGLang's server arguments, python/sglang/srt/server_args.py):
- every arm: `--enable-cache-report` (cached prompt tokens reported per request) and `--random-seed 0`;
- the control and every arm that may not reuse: `--disable-radix-cache` (SGLang's radix prefix cache is
  on by default);
- quantize: `--kv-cache-dtype` with the treatment dtype's SGLang name (`APPLIES.kv_dtypes`: fp8_e4m3,
  fp8_e5m2, nvfp4, bf16; SGLang scales FP8 per layer: scale "tensor"); every other dtype refused;
- reuse, prefix: the radix cache left on;
- offload, host, composed with prefix reuse: `--enable-hierarchical-cache` (HiCache: radix-cache blocks
  kept in host memory and loaded back as hits); with HiCache on, each answer splits its cached tokens
  into `meta_info.cached_tokens_details` {device, host} (None when nothing was cached): the host tokens,
  in whole blocks of the offload's `block_size`, are the row's blocks read back from the tier.
Requests go to SGLang's native `/generate` with `input_ids` (no re-tokenisation) and a `cache_salt`;
its answer names `output_ids` and `meta_info.{prompt_tokens, cached_tokens, finish_reason,
output_token_logprobs}` (SGLang's docs, native API). Not run here: SGLang is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvgate.engines.server.flavours.applies import Applies, kind_refusal
from kvgate.engines.server.flavours.base import (
    ArmLaunch,
    check_prompt,
    count,
    engine_args_refusal,
    offload_part,
    quantize_part,
    reuse_part,
    token_ids,
)
from kvgate.engines.server.response import Completion, MalformedResponse
from kvgate.engines.server.stack_version import VersionAnswer
from kvgate.treatments.spec import Treatment

KV_CACHE_DTYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "nvfp4", "fp4_mx_block16", "bf16", "bfloat16")
"""SGLang's `--kv-cache-dtype` choices (server_args.py)."""
APPLIES = Applies(
    stack="SGLang",
    kinds=("quantize", "reuse", "offload"),
    kv_flag="--kv-cache-dtype",
    kv_choices=KV_CACHE_DTYPES,
    kv_dtypes={"fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "nvfp4": "nvfp4", "bf16": "bf16"},
    fp8_scales=("tensor",),
    reuse_modes=("prefix",),
    offload_tiers=("host",),
    proof={
        "quantize": "GET /get_server_info: kv_cache_dtype",
        "reuse": "meta_info.cached_tokens (--enable-cache-report)",
        "offload": "meta_info.cached_tokens_details.host (HiCache)",
    },
)
REFUSED_KINDS = {
    "eviction": "SGLang does not evict a request's prompt KV (its radix cache evicts whole finished prefixes)"
}

VERSION_ANSWER = VersionAnswer("SGLang", "/get_server_info", "version")


@dataclass(frozen=True)
class SGLang:
    name: str
    salted: bool = True
    events_path: str | None = None
    saves_slots: bool = False
    info_path: str | None = "/get_server_info"
    """SGLang's server arguments as it resolved them: `kv_cache_dtype` is the dtype it stores."""
    version_answer: VersionAnswer = VERSION_ANSWER

    def command(self, model: str, host: str, port: int, python: str) -> list[str]:
        return [
            python,
            "-m",
            "sglang.launch_server",
            "--model-path",
            model,
            "--host",
            host,
            "--port",
            str(port),
        ]

    def launch(self, treatment: Treatment, kv_blocks: int | None = None) -> ArmLaunch:
        flags = ["--enable-cache-report", "--random-seed", "0"]
        if reuse_part(treatment) is None:
            flags.append("--disable-radix-cache")
        quantize = quantize_part(treatment)
        if quantize is not None:
            flags += [APPLIES.kv_flag, APPLIES.kv_dtypes[quantize.dtype]]
        if offload_part(treatment) is not None:
            flags.append("--enable-hierarchical-cache")
        return ArmLaunch(flags)

    @property
    def applies(self) -> Applies:
        return APPLIES

    def refusal(self, treatment: Treatment) -> str | None:
        refused = kind_refusal(APPLIES, treatment, REFUSED_KINDS)
        if refused:
            return refused
        reuse, offload, quantize = reuse_part(treatment), offload_part(treatment), quantize_part(treatment)
        if reuse is not None and reuse.mode not in APPLIES.reuse_modes:
            return "SGLang's radix cache reuses identical token prefixes only, not spans at other offsets"
        if offload is not None and reuse is None:
            return (
                "SGLang's hierarchical cache (--enable-hierarchical-cache) keeps radix-cache blocks in host "
                "memory and loads them back as prefix hits: compose offload with prefix reuse"
            )
        if offload is not None and offload.tier not in APPLIES.offload_tiers:
            return (
                "SGLang's hierarchical cache keeps its second tier in host memory; a disk tier is not mapped"
            )
        if quantize is not None and (refused := APPLIES.dtype_refusal(quantize)):
            return refused
        return engine_args_refusal(treatment, self.name)

    def request(
        self, model_id: str, prompt: list[int], max_tokens: int, salt: str, measured: bool, reuse: bool
    ) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "input_ids": prompt,
            "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0.0},
            "cache_salt": salt,
        }
        if measured:
            body["return_logprob"] = True
        return "/generate", body

    def parse(self, body: Any, n_prompt: int) -> Completion:
        if not isinstance(body, dict) or not isinstance(body.get("meta_info"), dict):
            raise MalformedResponse("the answer has no meta_info object")
        meta = body["meta_info"]
        tokens = token_ids(body.get("output_ids"), "output_ids")
        text = body.get("text")
        if not isinstance(text, str):
            raise MalformedResponse("text is missing or not a string")
        check_prompt(meta.get("prompt_tokens"), n_prompt, "meta_info.prompt_tokens")
        cached = count(meta.get("cached_tokens", 0), "meta_info.cached_tokens", n_prompt)
        details = meta.get("cached_tokens_details")
        if details is not None and not isinstance(details, dict):
            raise MalformedResponse("meta_info.cached_tokens_details is not an object")
        where = "meta_info.cached_tokens_details.host"
        host = None if details is None else count(details.get("host", 0), where, cached)
        finish = meta.get("finish_reason")
        reason = finish.get("type") if isinstance(finish, dict) else finish
        if reason is not None and not isinstance(reason, str):
            raise MalformedResponse("meta_info.finish_reason is not a string or {type: string}")
        logprobs = _logprobs(meta.get("output_token_logprobs"), tokens)
        return Completion(tokens, text, reason, logprobs, n_prompt, cached, host)

    def tier_events(self, body: Any) -> tuple[int, int]:
        raise NotImplementedError(f"{self.name} has no KV cache events (events_path is None)")

    def kv_dtype(self, info: Any) -> str | None:
        dtype = info.get("kv_cache_dtype") if isinstance(info, dict) else None
        return dtype if isinstance(dtype, str) and dtype else None


def _logprobs(value: Any, tokens: tuple[int, ...]) -> tuple[float, ...]:
    """SGLang lists [logprob, token id, text] per output token; each id must be the one answered."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) != len(tokens):
        raise MalformedResponse("meta_info.output_token_logprobs does not give one entry per output token")
    out = []
    for entry, token in zip(value, tokens, strict=True):
        if not (isinstance(entry, list) and len(entry) >= 2 and isinstance(entry[0], int | float)):
            raise MalformedResponse(f"meta_info.output_token_logprobs holds {entry!r}")
        if entry[1] != token:
            raise MalformedResponse(f"meta_info.output_token_logprobs names token {entry[1]!r} for {token}")
        out.append(float(entry[0]))
    return tuple(out)
