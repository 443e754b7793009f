"""An arm's `vllm serve` flags: the same engine arguments the in-process engine gives `vllm.LLM`
(`kvgate.engines.vllm.args.arm_args`), written as command-line flags, plus what the server must report.

A true boolean is `--name`, a false one `--no-name` (vLLM's boolean flags take both forms); a table is
JSON; None is left out. `--enable-prompt-tokens-details` makes the server report the cached prompt tokens
of every request, which the isolation checks read.
"""

from __future__ import annotations

import json
from typing import Any

SERVER_FLAGS = ("--enable-prompt-tokens-details",)


def flag_name(key: str) -> str:
    return "--" + key.replace("_", "-")


def engine_flags(args: dict[str, Any]) -> list[str]:
    """`args` (vLLM engine arguments by field name) as `vllm serve` flags, in sorted order."""
    flags: list[str] = []
    for key, value in sorted(args.items()):
        if value is None:
            continue
        if isinstance(value, bool):
            flags.append(flag_name(key) if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, dict | list):
            flags += [flag_name(key), json.dumps(value, sort_keys=True)]
        else:
            flags += [flag_name(key), str(value)]
    return flags


def server_flags(args: dict[str, Any]) -> list[str]:
    """The whole `{arm_flags}` of a launched vLLM server."""
    return [*engine_flags(args), *SERVER_FLAGS]
