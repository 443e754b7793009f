"""The version a serving stack names for itself, read from each arm's server once it answers.

Where each stack names it (docs/server-flavours.md cites the code):
- vLLM: `GET /version` → `{"version": …}` (vllm/entrypoints/serve/instrumentator/basic.py);
- llama-server: `GET /props` → `build_info`, "b<build number>-<commit>" (tools/server/server-context.cpp);
- SGLang: `GET /get_server_info` → `version` (python/sglang/srt/entrypoints/http_server.py);
- TensorRT-LLM's trtllm-serve: `GET /version` → `{"version": …}` (tensorrt_llm/serve/openai_server.py).

What a session read, `{stack, version, source}` (version None: the server named none), goes in its pass
record and in the run's manifest (`rundir/stack_version.py`), where every later server of the run,
another arm's or a resumed run's, must name the same version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_VERSION_CHARS = 200
STACK_VERSION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["stack", "version", "source"],
    "properties": {
        "stack": {"type": "string", "minLength": 1, "maxLength": 64},
        "version": {"type": ["string", "null"], "minLength": 1, "maxLength": MAX_VERSION_CHARS},
        "source": {"type": "string", "minLength": 1, "maxLength": 200},
    },
}
"""A stack version as a pass record and the manifest hold it."""


@dataclass(frozen=True)
class VersionAnswer:
    """Where a stack names its version: `GET path`, the answer's top-level `field`."""

    stack: str
    path: str
    field: str

    def recorded(self, status: int | None, body: bytes) -> dict[str, Any]:
        """The stack version as recorded, from the server's answer (`status` None: no answer)."""
        return {"stack": self.stack, "version": self._version(status, body), "source": self.source}

    @property
    def source(self) -> str:
        return f"GET {self.path} {self.field}"

    def _version(self, status: int | None, body: bytes) -> str | None:
        if status != 200:
            return None
        try:
            value = json.loads(body).get(self.field)
        except (ValueError, RecursionError, AttributeError):
            return None
        if not isinstance(value, str) or not 0 < len(value) <= MAX_VERSION_CHARS or not value.isprintable():
            return None
        return value


VLLM = VersionAnswer("vLLM", "/version", "version")


def described(version: dict[str, Any]) -> str:
    """'llama-server b1-0c1e570', or 'vLLM (no version named at GET /version version)'."""
    named = version.get("version")
    if named is None:
        return f"{version.get('stack')} (no version named at {version.get('source')})"
    return f"{version.get('stack')} {named}"
