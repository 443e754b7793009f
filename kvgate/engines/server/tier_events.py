"""An offload arm's blocks counted from the stack's own KV cache events (TensorRT-LLM's `POST
/kv_cache_events`, which drains the events kept since the last call; `flavours/trtllm.py` reads them).

The arm's measured requests go one at a time, each between two drains, so a row's `n_tier_written` and
`n_tier_read` are the blocks the server says it moved to its offload tier and brought back while it
served that case (the warm-up's moves, drained before the measured pass, are in no row).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from kvgate.engines.server import bounded_http
from kvgate.engines.server.response import MalformedResponse
from kvgate.errors import EngineFailure

DEADLINE_S = 30.0


def drain(url: str, arm: str, path: str, count: Callable[[Any], tuple[int, int]]) -> tuple[int, int]:
    """(blocks written to the tier, blocks read back) in the events the server kept since the last drain."""
    where = f"arm {arm!r}: {path}"
    try:
        status, raw = bounded_http.request("POST", f"{url}{path}", DEADLINE_S)
    except (httpx.HTTPError, TimeoutError) as exc:
        raise EngineFailure(f"{where} failed: {exc or f'no answer within {DEADLINE_S:g} s'}") from None
    if status != 200:
        raise EngineFailure(f"{where} answered HTTP {status}")
    try:
        return count(json.loads(raw))
    except (ValueError, RecursionError, MalformedResponse) as exc:
        raise EngineFailure(f"{where}: {exc}") from None
