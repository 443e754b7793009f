"""The tokenizer seam that generators and freezing use: render a chat, count and encode its tokens."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Protocol


class PromptTokenizer(Protocol):
    """What freezing needs from a tokenizer. `name` identifies it in the workload's metadata."""

    name: str

    def encode_chat(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """Token ids of the chat rendered with the model's template and the generation prompt."""
        ...

    def count_chat(self, messages: Sequence[dict[str, str]]) -> int:
        """len(encode_chat(messages)), possibly faster."""
        ...

    def question_start(self, messages: Sequence[dict[str, str]], question: str) -> int | None:
        """Token index where `question` (inside the last user message) begins, or None if absent."""
        ...


_WORD = re.compile(r"\w+|[^\w\s]")


class WordTokenizer:
    """A model-free stand-in: one token per word or punctuation mark. Used when freezing without --model."""

    name = "words"

    def _render(self, messages: Sequence[dict[str, str]]) -> str:
        return "\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\nassistant:"

    def encode_chat(self, messages: Sequence[dict[str, str]]) -> list[int]:
        return [zlib.crc32(w.encode()) & 0x7FFFFFFF for w in _WORD.findall(self._render(messages))]

    def count_chat(self, messages: Sequence[dict[str, str]]) -> int:
        return len(_WORD.findall(self._render(messages)))

    def question_start(self, messages: Sequence[dict[str, str]], question: str) -> int | None:
        text = self._render(messages)
        at = text.rfind(question)
        return None if at < 0 else len(_WORD.findall(text[:at]))
