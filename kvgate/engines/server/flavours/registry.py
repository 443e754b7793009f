"""The server engine's flavours besides vLLM, by the name `-E flavour=` takes (a lazy
`kvgate.registry.Registry`: a flavour's module is imported when a run first names it)."""

from __future__ import annotations

from kvgate.engines.server.flavours.base import Flavour
from kvgate.registry import Registry

VLLM = "vllm"
FLAVOURS: Registry[Flavour] = Registry(
    "server flavour",
    lazy={
        "sglang": "kvgate.engines.server.flavours.sglang:SGLang",
        "trtllm": "kvgate.engines.server.flavours.trtllm:TensorRTLLM",
        "llama-server": "kvgate.engines.server.flavours.llama_server:LlamaServer",
    },
)
NAMES = (VLLM, *FLAVOURS)
