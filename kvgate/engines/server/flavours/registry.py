"""The server engine's flavours besides vLLM, by the name `-E flavour=` takes."""

from __future__ import annotations

from kvgate.engines.server.flavours.base import Flavour
from kvgate.engines.server.flavours.llama_server import LlamaServer
from kvgate.engines.server.flavours.sglang import SGLang
from kvgate.engines.server.flavours.trtllm import TensorRTLLM

VLLM = "vllm"
FLAVOURS: dict[str, Flavour] = {f.name: f for f in (SGLang(), TensorRTLLM(), LlamaServer())}
NAMES = (VLLM, *FLAVOURS)
