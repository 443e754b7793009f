"""llama.cpp's `llama-server` as a flavour of the server engine (run for real: docs/server-flavours.md).

The executable: `llama-server` beside kvgate's Python (the virtualenv's bin, where `make setup` builds it
from the llama.cpp that llama-cpp-python vendors), else on PATH. Flags per arm (tools/server/README.md):
every arm `--parallel 1` (one slot: the slot's prompt cache is the arm's), `--metrics`, `--seed 0` and
`--log-verbosity 4` (the level that logs the KV cache allocated); every arm but plain prefix reuse
`--cache-ram 0` (no host-memory prompt cache a later case could be restored from, nor one that could
serve an offload arm's case in place of its restored slot); quantize: `--cache-type-k` /
`--cache-type-v` (the GGML types) with `--flash-attn on`, which llama.cpp needs for a quantised V cache.
The model is a GGUF (`-m`).

Prefix reuse is the slot's prompt cache, asked per request: `cache_prompt` true for a reuse arm, false
for every other (its default is true, which would serve a case from the previous one's prefix).
Requests go to the native `/completion` with the token ids as `prompt`, `n_predict`, `temperature` 0
(greedy) and `return_tokens`; of the answer (`server_task_result_cmpl_final::to_json_non_oaicompat`),
`tokens` are the output ids, `tokens_evaluated` the prompt's length, `timings.cache_n` the prompt tokens
served from the slot's cache, `stop_type` eos, word or limit. (`tokens_cached` is not a hit count: it is
every token the slot holds after the request, prompt and output.) It takes no cache_salt: each arm's own
server is its namespace.

The KV types are what the server printed when it allocated its cache (`llama_kv_cache: size = … MiB
(N cells, …), K (q8_0): … MiB, V (q8_0): … MiB` in its log), with the bytes one cached token takes
(K's and V's MiB over the cells); `/metrics`' `llamacpp:prompt_tokens_cached_total` counts every prompt
token the server served from a cache, over all requests.

Offload (tier "disk", composed with prefix reuse): `--slot-save-path` (a folder of the run's), each
case's slot saved to a file after its warm-up, erased, and restored before its measured request
(`server/slot_offload.py`, proven by the server's own `n_saved` and `n_restored`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvgate.engines.kv_cache_facts import KVCacheFacts
from kvgate.engines.server.flavours.applies import Applies, kind_refusal
from kvgate.engines.server.flavours.base import (
    SLOTS_PLACEHOLDER,
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
from kvgate.treatments.spec import GGML_KV_TYPES, Treatment

APPLIES = Applies(
    stack="llama-server",
    kinds=("quantize", "reuse", "offload"),
    kv_flag="--cache-type-k/-v",
    kv_choices=GGML_KV_TYPES,
    kv_dtypes={t: t for t in GGML_KV_TYPES},
    fp8_scales=(),
    reuse_modes=("prefix",),
    offload_tiers=("disk",),
    proof={
        "quantize": "the K and V types its log names allocating the cache",
        "reuse": "timings.cache_n",
        "offload": "POST /slots/0?action=save n_saved, action=restore n_restored",
    },
)
"""llama-server's KV cache types are llama.cpp's (common/arg.cpp `kv_cache_types`)."""
REFUSED_KINDS = {
    "eviction": (
        "llama-server shifts its context only when a request overflows it (--context-shift, n_keep), "
        "not a share of every prompt: run the eviction with --engine llamacpp"
    ),
}
STOP_REASONS = {"eos": "stop", "word": "stop", "limit": "length"}
"""llama-server's `stop_type` → the OpenAI finish reason the session reads."""
EXECUTABLE = "llama-server"
KV_CACHE_LINE = re.compile(
    r"llama_kv_cache: size = *([0-9.]+) MiB \( *(\d+) cells,.*?K \((\w+)\): *([0-9.]+) MiB, "
    r"V \((\w+)\): *([0-9.]+) MiB"
)
"""The line llama.cpp logs when it allocates a KV cache (src/llama-kv-cache.cpp)."""
CACHED_TOTAL = re.compile(r"^llamacpp:prompt_tokens_cached_total\s+([0-9.eE+]+)\s*$", re.MULTILINE)
MIB = 1 << 20
LOG_VERBOSITY = 4
"""llama-server's "trace" level: the lowest that logs the KV cache it allocated (about 20 lines a request)."""

VERSION_ANSWER = VersionAnswer("llama-server", "/props", "build_info")
"""`build_info` is "b<build number>-<commit>" (common/build-info.cpp.in `llama_build_info`)."""


@dataclass(frozen=True)
class LlamaServer:
    name: str
    salted: bool = False
    events_path: str | None = None
    saves_slots: bool = True
    """An offload arm's tier is the slot saved to a file and restored (`server/slot_offload.py`)."""
    info_path: str | None = None
    """llama-server names its cache types in its log (`kv_cache_in_log`), not in an answer."""
    version_answer: VersionAnswer = VERSION_ANSWER

    def command(self, model: str, host: str, port: int, python: str) -> list[str]:
        return [executable(python), "-m", model, "--host", host, "--port", str(port)]

    def launch(self, treatment: Treatment, kv_blocks: int | None = None) -> ArmLaunch:
        flags = ["--parallel", "1", "--metrics", "--seed", "0", "--log-verbosity", str(LOG_VERBOSITY)]
        if reuse_part(treatment) is None or offload_part(treatment) is not None:
            flags += ["--cache-ram", "0"]
        quantize = quantize_part(treatment)
        if quantize is not None:
            flags += ["--cache-type-k", quantize.dtype, "--cache-type-v", quantize.value_dtype]
            flags += ["--flash-attn", "on"]
        if offload_part(treatment) is not None:
            flags += ["--slot-save-path", SLOTS_PLACEHOLDER]
        return ArmLaunch(flags)

    @property
    def applies(self) -> Applies:
        return APPLIES

    def refusal(self, treatment: Treatment) -> str | None:
        refused = kind_refusal(APPLIES, treatment, REFUSED_KINDS)
        if refused:
            return refused
        reuse, quantize = reuse_part(treatment), quantize_part(treatment)
        if reuse is not None and reuse.mode not in APPLIES.reuse_modes:
            return "llama-server's slot cache reuses the common prefix (--cache-reuse: shifted chunks)"
        offload = offload_part(treatment)
        if offload is not None and reuse is None:
            return (
                "llama-server serves a restored slot's KV as its prompt cache (cache_prompt): compose "
                "offload with prefix reuse"
            )
        if offload is not None and offload.tier not in APPLIES.offload_tiers:
            return (
                "llama-server saves a slot's KV to a file (--slot-save-path, /slots/0?action=save): "
                'tier = "disk"; a host tier is --engine llamacpp\'s'
            )
        if quantize is not None and (refused := APPLIES.dtype_refusal(quantize)):
            return refused
        return engine_args_refusal(treatment, self.name)

    def request(
        self, model_id: str, prompt: list[int], max_tokens: int, salt: str, measured: bool, reuse: bool
    ) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "prompt": prompt,
            "n_predict": max_tokens,
            "temperature": 0.0,
            "cache_prompt": reuse,
            "return_tokens": True,
        }
        if measured:
            body["n_probs"] = 1
        return "/completion", body

    def parse(self, body: Any, n_prompt: int) -> Completion:
        if not isinstance(body, dict):
            raise MalformedResponse(f"the answer is a {type(body).__name__}, not a JSON object")
        tokens = token_ids(body.get("tokens"), "tokens")
        text = body.get("content")
        if not isinstance(text, str):
            raise MalformedResponse("content is missing or not a string")
        check_prompt(body.get("tokens_evaluated"), n_prompt, "tokens_evaluated")
        timings = body.get("timings")
        if not isinstance(timings, dict):
            raise MalformedResponse("timings is missing or not an object (its cache_n: the cached tokens)")
        cached = count(timings.get("cache_n"), "timings.cache_n", n_prompt)
        stop = body.get("stop_type")
        finish = STOP_REASONS.get(stop) if isinstance(stop, str) else None
        logprobs = _logprobs(body.get("completion_probabilities"), tokens)
        return Completion(tokens, text, finish, logprobs, n_prompt, cached)

    def tier_events(self, body: Any) -> tuple[int, int]:
        raise NotImplementedError(f"{self.name} has no KV cache events (events_path is None)")

    def kv_dtype(self, info: Any) -> str | None:
        return None

    def kv_cache_in_log(self, log: str) -> KVCacheFacts | None:
        """The KV cache the server logged allocating: its types ("K+V" when they differ) and the bytes one
        cached token takes in it; None when the log names none (or names caches of other types)."""
        found = KV_CACHE_LINE.findall(log)
        if not found:
            return None
        types = {(k, v) for _, _, k, _, v, _ in found}
        if len(types) != 1:
            return None
        (k, v), (_, cells, _, k_mib, _, v_mib) = next(iter(types)), found[-1]
        per_token = (float(k_mib) + float(v_mib)) * MIB / int(cells) if int(cells) else None
        return KVCacheFacts(k if k == v else f"{k}+{v}", per_token)

    def cached_total(self, metrics: str) -> int | None:
        """`llamacpp:prompt_tokens_cached_total` from `/metrics`, or None when it is not there."""
        found = CACHED_TOTAL.search(metrics)
        return None if found is None else round(float(found.group(1)))


def executable(python: str) -> str:
    """`llama-server` beside `python` (the virtualenv's bin), else the name for PATH to find."""
    beside = Path(python).parent / EXECUTABLE
    return str(beside) if beside.is_file() else EXECUTABLE


def _logprobs(value: Any, tokens: tuple[int, ...]) -> tuple[float, ...]:
    """`completion_probabilities` gives {id, logprob, …} per output token (n_probs > 0)."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) != len(tokens):
        raise MalformedResponse("completion_probabilities does not give one entry per output token")
    out = []
    for entry, token in zip(value, tokens, strict=True):
        logprob = entry.get("logprob") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or entry.get("id") != token or not isinstance(logprob, int | float):
            raise MalformedResponse(f"completion_probabilities holds {entry!r} for token {token}")
        out.append(float(logprob))
    return tuple(out)
