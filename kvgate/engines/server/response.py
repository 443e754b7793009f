"""A completions answer read strictly: what kvgate needs from it, or why it is malformed.

Needed: `choices[0].token_ids` (the output token ids, vLLM's `return_token_ids`), `choices[0].text`,
`usage.prompt_tokens` (which must equal the prompt sent: a server that re-tokenised it answered another
question). Optional: `choices[0].finish_reason`, `choices[0].logprobs.token_logprobs`, and
`usage.prompt_tokens_details.cached_tokens` (0 when the server does not report it; the counter checks
then flag a reuse arm that never reads the cache).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


class MalformedResponse(ValueError):
    """The answer lacks a field kvgate needs, or holds one of the wrong type."""


@dataclass(frozen=True)
class Completion:
    token_ids: tuple[int, ...]
    text: str
    finish_reason: str | None
    logprobs: tuple[float, ...]
    prompt_tokens: int
    cached_tokens: int
    tier_tokens: int | None = None
    """Of the cached tokens, those the stack says it loaded from its offload tier (None: it says not)."""


def parse_completion(body: Any, n_prompt: int) -> Completion:
    """`body` (decoded JSON) as a Completion, or MalformedResponse naming the field at fault."""
    if not isinstance(body, dict):
        raise MalformedResponse(f"the answer is a {type(body).__name__}, not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        raise MalformedResponse("choices is not a list of one choice")
    choice = choices[0]
    tokens = choice.get("token_ids")
    if not isinstance(tokens, list) or not _ints(tokens):
        raise MalformedResponse(
            "choices[0].token_ids is missing or not a list of token ids in [0, 2^31) (the server must "
            "honour return_token_ids)"
        )
    text = choice.get("text")
    if not isinstance(text, str):
        raise MalformedResponse("choices[0].text is missing or not a string")
    finish = choice.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise MalformedResponse("choices[0].finish_reason is not a string")
    usage = body.get("usage")
    if not isinstance(usage, dict) or not _int(usage.get("prompt_tokens")):
        raise MalformedResponse("usage.prompt_tokens is missing")
    if usage["prompt_tokens"] != n_prompt:
        raise MalformedResponse(
            f"usage.prompt_tokens is {usage['prompt_tokens']} for a prompt of {n_prompt} token ids"
        )
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is not None and not (_int(cached) and 0 <= cached <= n_prompt):
        raise MalformedResponse(f"usage.prompt_tokens_details.cached_tokens is {cached!r}")
    return Completion(
        token_ids=tuple(tokens),
        text=text,
        finish_reason=finish,
        logprobs=_logprobs(choice.get("logprobs"), len(tokens)),
        prompt_tokens=n_prompt,
        cached_tokens=int(cached or 0),
    )


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


MAX_TOKEN_ID = (1 << 31) - 1
"""Token ids are stored as int32; one beyond is no token of any vocabulary."""


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(_int(v) and 0 <= v <= MAX_TOKEN_ID for v in value)


def _logprobs(value: Any, n_tokens: int) -> tuple[float, ...]:
    """The chosen tokens' logprobs (empty when the server sent none)."""
    if value is None:
        return ()
    listed = value.get("token_logprobs") if isinstance(value, dict) else None
    if not isinstance(listed, list) or len(listed) != n_tokens:
        raise MalformedResponse("choices[0].logprobs.token_logprobs does not give one logprob per token")
    out = []
    for item in listed:
        if item is None:
            continue
        if not isinstance(item, int | float) or isinstance(item, bool) or math.isnan(item):
            raise MalformedResponse(f"choices[0].logprobs.token_logprobs holds {item!r}")
        out.append(float(item))
    return tuple(out)
