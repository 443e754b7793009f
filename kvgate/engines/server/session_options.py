"""What an arm session of the `server` engine reads of its engine (`engine.ServerEngine` checks and resolves
these; `session.py` and `arm_requests.py` read them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from kvgate.engines.server.flavours.base import Flavour


class ServerOptions(Protocol):
    """What a session reads of its engine (`engine.ServerEngine`, which checked and resolved them)."""

    form: str
    """"launched" or "endpoint"."""
    endpoints: dict[str, str]
    flavour: Flavour | None
    template: str
    model_path: Path | None
    base_args: dict[str, Any]
    offload_gib: float
    block_size: int | None
    eos_ids: set[int]
    vocab_size: int | None
    timeout_s: float
    retries: int
    backoff_s: float
    ready_s: float
    stop_s: float
