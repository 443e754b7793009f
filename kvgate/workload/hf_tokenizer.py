"""PromptTokenizer over a Hugging Face tokenizer (`tokenizer.json`) and the model's chat template.

Loads with `tokenizers` and `jinja2` alone, so freezing does not import transformers or torch. Token
ids come from `ChunkedEncoder`: exact, and fast on prompts that share sentences.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvgate.errors import BadInput
from kvgate.workload.chat_template import SPECIAL_TOKEN_KEYS, ChatTemplate
from kvgate.workload.chunked_encoding import ChunkedEncoder


class HFPromptTokenizer:
    """Renders chats with the model's template (generation prompt added) and maps text to token indices."""

    def __init__(
        self, backend: Any, template: ChatTemplate, name: str, max_length: int | None = None
    ) -> None:
        self.backend = backend
        self.template = template
        self.name = name
        self.max_length = max_length
        self.encoder = ChunkedEncoder(backend)

    @classmethod
    def from_folder(cls, folder: Path, name: str) -> HFPromptTokenizer:
        """From a model folder: `tokenizer.json`, the chat template, and `config.json`'s context length."""
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if not (folder / "tokenizer.json").exists():
            raise BadInput(f"model folder {folder} has no tokenizer.json, the fast tokenizer freezing needs")
        try:
            template = ChatTemplate.from_folder(folder)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
        return cls(backend, template, name, config.get("max_position_embeddings"))

    @classmethod
    def from_transformers(cls, tokenizer: Any, name: str, max_length: int | None = None) -> HFPromptTokenizer:
        """From a loaded transformers fast tokenizer (its Rust backend and chat template)."""
        special = {k: str(getattr(tokenizer, k)) for k in SPECIAL_TOKEN_KEYS if getattr(tokenizer, k, None)}
        template = ChatTemplate(tokenizer.chat_template, special)
        return cls(tokenizer.backend_tokenizer, template, name, max_length)

    def render(self, messages: Sequence[dict[str, str]]) -> str:
        return self.template.render(messages)

    def encode_chat(self, messages: Sequence[dict[str, str]]) -> list[int]:
        return self.encoder.encode(self.render(messages))

    def encode_chat_exact(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """The tokenizer's own encoding of the whole rendered chat; `encode_chat` must equal it."""
        return self.encoder.exact(self.render(messages))

    def count_chat(self, messages: Sequence[dict[str, str]]) -> int:
        return self.encoder.count(self.render(messages))

    def question_start(self, messages: Sequence[dict[str, str]], question: str) -> int | None:
        text = self.render(messages)
        at = text.rfind(question)
        return None if at < 0 else self.encoder.token_at(text, at)
