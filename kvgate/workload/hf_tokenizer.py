"""PromptTokenizer over a Hugging Face tokenizer and its chat template."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


class HFPromptTokenizer:
    """Renders chats with the model's template (generation prompt added) and maps text to token indices."""

    def __init__(self, tokenizer: Any, name: str, max_length: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.name = name
        self.max_length = max_length

    @classmethod
    def from_folder(cls, folder: Path, name: str) -> HFPromptTokenizer:
        import json

        from transformers import AutoTokenizer

        config = json.loads((folder / "config.json").read_text())
        return cls(AutoTokenizer.from_pretrained(str(folder)), name, config.get("max_position_embeddings"))

    def render(self, messages: Sequence[dict[str, str]]) -> str:
        return str(
            self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        )

    def encode_chat(self, messages: Sequence[dict[str, str]]) -> list[int]:
        return list(self.tokenizer(self.render(messages), add_special_tokens=False)["input_ids"])

    def count_chat(self, messages: Sequence[dict[str, str]]) -> int:
        return len(self.encode_chat(messages))

    def question_start(self, messages: Sequence[dict[str, str]], question: str) -> int | None:
        text = self.render(messages)
        at = text.rfind(question)
        if at < 0:
            return None
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        for index, (_start, end) in enumerate(enc["offset_mapping"]):
            if end > at:
                return index
        return None
