"""The KV cache vLLM allocated, as it reports it after start-up: the proof of a quantised arm.

In-process, the LLM's `cache_config` (`cache_dtype`, `num_gpu_blocks`, `block_size`,
`kv_cache_size_tokens`, `kv_cache_memory_bytes`); behind `vllm serve`, the same fields as the labels of
the `vllm:cache_config_info` gauge on `/metrics`. The element type is the cache dtype ("auto": the
model's dtype); the bytes one cached token takes are the KV budget over the tokens it bought
(`kv_cache_memory_bytes` ÷ `kv_cache_size_tokens`, or ÷ blocks × block size): an FP8 cache buys about
twice the control's tokens for the same budget. Unknown where vLLM does not say (a GPU budget set by
memory utilisation names no bytes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CACHE_CONFIG_INFO = "vllm:cache_config_info"
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class KVCacheFacts:
    dtype: str | None
    bytes_per_token: float | None

    def evidence(self, n_entries: int) -> dict[str, Any]:
        """A case's `kv_dtype` and `kv_bytes` (engines.base.Generation) for `n_entries` cached tokens."""
        size = None if self.bytes_per_token is None else round(n_entries * self.bytes_per_token)
        return {"kv_dtype": self.dtype, "kv_bytes": size}


NO_FACTS = KVCacheFacts(None, None)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def cache_facts(config: Mapping[str, Any], model_dtype: str | None) -> KVCacheFacts:
    """The facts of a cache config (attributes or metric labels, as strings or numbers)."""
    dtype = str(config.get("cache_dtype") or "auto")
    if dtype == "auto":
        dtype = str(model_dtype).removeprefix("torch.") if model_dtype else "auto"
    budget = _number(config.get("kv_cache_memory_bytes"))
    tokens = _number(config.get("kv_cache_size_tokens"))
    if tokens is None:
        blocks, block = _number(config.get("num_gpu_blocks")), _number(config.get("block_size"))
        tokens = blocks * block if blocks and block else None
    return KVCacheFacts(dtype, budget / tokens if budget and tokens else None)


def metrics_cache_config(text: str) -> dict[str, str] | None:
    """The labels of the first `vllm:cache_config_info` series in a Prometheus text, else None."""
    for line in text.splitlines():
        if line.startswith(CACHE_CONFIG_INFO + "{"):
            return dict(_LABEL.findall(line[len(CACHE_CONFIG_INFO) : line.rfind("}") + 1]))
    return None
