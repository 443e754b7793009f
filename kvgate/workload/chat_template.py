"""A model's Jinja chat template, rendered without importing transformers (and with it torch).

Rendering follows the documented environment Hugging Face chat templates are written for: a sandboxed
Jinja environment with `trim_blocks` and `lstrip_blocks`, the loop-controls extension, a `tojson`
filter that keeps non-ASCII text, and the globals `raise_exception` and `strftime_now`. The special
tokens of `tokenizer_config.json` (`bos_token`, `eos_token`, ...) are passed as template variables.
tests/workload/test_chat_template.py checks the output against transformers' `apply_chat_template`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token")


class ChatTemplateError(ValueError):
    """The template asked to fail (`raise_exception`) for these messages."""


def _raise(message: str) -> None:
    raise ChatTemplateError(message)


def _tojson(
    value: Any, indent: int | None = None, ensure_ascii: bool = False, sort_keys: bool = False
) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class ChatTemplate:
    """`render(messages)` is the chat as the model sees it, with the assistant's generation prompt."""

    def __init__(self, source: str, special_tokens: Mapping[str, str] | None = None) -> None:
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = _strftime_now
        self.source = source
        self._template = env.from_string(source)
        self._variables = dict(special_tokens or {})

    @classmethod
    def from_folder(cls, folder: Path) -> ChatTemplate:
        """The template of a Hugging Face model folder: `chat_template.jinja`, else the
        `chat_template` entry of `tokenizer_config.json`; special tokens from the latter."""
        config_path = folder / "tokenizer_config.json"
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
        jinja = folder / "chat_template.jinja"
        source = jinja.read_text(encoding="utf-8") if jinja.exists() else config.get("chat_template")
        if not isinstance(source, str):
            raise ValueError(f"{folder} has no chat template (chat_template.jinja or tokenizer_config.json)")
        return cls(source, {key: _token_text(config[key]) for key in SPECIAL_TOKEN_KEYS if config.get(key)})

    def render(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True) -> str:
        return self._template.render(
            messages=list(messages), add_generation_prompt=add_generation_prompt, **self._variables
        )


def _token_text(token: Any) -> str:
    """A special token as tokenizer_config.json writes it: a string or an AddedToken dict."""
    return str(token["content"]) if isinstance(token, dict) else str(token)
