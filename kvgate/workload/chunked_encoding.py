"""Exact token ids of long prompts, assembled from cached sentence encodings.

Sizing a prompt to a token count means counting many long prompts that share most of their sentences
(RULER-style haystacks), so encoding each whole prompt repeats nearly all of the work. For byte-level
BPE tokenizers with the GPT-2 pre-tokenizer (SmolLM2, GPT-2, StarCoder, ...) the encoding splits
exactly at sentence ends:

- BPE merges only inside a pre-token, and the pre-tokenizer's patterns are a contraction (`'s`, `'ll`,
  ...), an optional space followed by a run of letters, of digits or of other symbols, or a whitespace
  run. None joins a non-space character to whitespace after it, so wherever `text[i-1]` is `.`, `!` or
  `?` and `text[i]` is whitespace, a pre-token ends at i-1 and another starts at i.
- No pattern looks behind, and a match's end depends only on the character after it; both pieces end
  at a non-space character. So `encode(text) == encode(text[:i]) + encode(text[i:])`.

`ChunkedEncoder` splits there and encodes each distinct sentence once. It is used only where the
tokenizer's configuration has exactly these properties (`splits_at_sentence_ends`); otherwise each
text is one chunk and the encoding is the tokenizer's own. Tests compare the two on every generator's
prompts and on adversarial text; `freeze` re-checks the first case of each suite entry.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from itertools import accumulate, chain
from typing import Any

MAX_CACHED_CHUNKS = 200_000


def splits_at_sentence_ends(backend: Any) -> bool:
    """Whether `backend` (a `tokenizers.Tokenizer`) is byte-level BPE with the GPT-2 pre-tokenizer,
    no normalizer, no BPE dropout and no added token that strips whitespace beside it."""
    config = json.loads(backend.to_str())
    pre = config.get("pre_tokenizer") or {}
    model = config.get("model") or {}
    return (
        config.get("normalizer") is None
        and pre.get("type") == "ByteLevel"
        and pre.get("use_regex", True) is True
        and pre.get("add_prefix_space") is False
        and model.get("type") == "BPE"
        and not model.get("dropout")
        and not any(t.get("lstrip") or t.get("rstrip") for t in config.get("added_tokens") or ())
    )


class ChunkedEncoder:
    """`encode`, `count` and `token_at` over a `tokenizers.Tokenizer`, without special tokens added.

    Chunks end at each ". " (the split point of the module docstring that `str.split` finds fastest):
    with `pieces = text.split(". ")`, chunk 0 is `pieces[0] + "."`, the middle ones `" " + piece + "."`
    and the last `" " + pieces[-1]`. Encodings are cached by piece, one table per position kind.
    """

    def __init__(self, backend: Any, chunked: bool | None = None) -> None:
        self.backend = backend
        self.chunked = splits_at_sentence_ends(backend) if chunked is None else chunked
        self._first: dict[str, list[int]] = {}
        self._middle: dict[str, list[int]] = {}
        self._last: dict[str, list[int]] = {}

    def chunks(self, text: str) -> list[str]:
        pieces = text.split(". ") if self.chunked else [text]
        if len(pieces) == 1:
            return pieces
        return [pieces[0] + ".", *(" " + p + "." for p in pieces[1:-1]), " " + pieces[-1]]

    def _encoded(self, text: str) -> list[list[int]]:
        pieces = text.split(". ") if self.chunked else [text]
        if len(pieces) == 1:
            return [self._encode([text])[0]]
        if len(self._middle) > MAX_CACHED_CHUNKS:
            for table in (self._first, self._middle, self._last):
                table.clear()
        first = self._first.get(pieces[0]) or self._store(self._first, [pieces[0]], "", ".")[0]
        last = self._last.get(pieces[-1]) or self._store(self._last, [pieces[-1]], " ", "")[0]
        middle = pieces[1:-1]
        get = self._middle.get
        found = [get(p) for p in middle]
        if None in found:
            missing = list(dict.fromkeys(p for p, ids in zip(middle, found, strict=True) if ids is None))
            self._store(self._middle, missing, " ", ".")
            found = [get(p) for p in middle]
        return [first, *found, last]  # type: ignore[list-item]

    def _store(
        self, table: dict[str, list[int]], pieces: list[str], before: str, after: str
    ) -> list[list[int]]:
        encoded = self._encode([before + p + after for p in pieces])
        table.update(zip(pieces, encoded, strict=True))
        return encoded

    def _encode(self, texts: list[str]) -> list[list[int]]:
        """One call per text for a few (a batch call's thread-pool start-up costs more), else a batch."""
        if len(texts) < 16:
            return [self.backend.encode(t, add_special_tokens=False).ids for t in texts]
        return [e.ids for e in self.backend.encode_batch(texts, add_special_tokens=False)]

    def encode(self, text: str) -> list[int]:
        return list(chain.from_iterable(self._encoded(text)))

    def count(self, text: str) -> int:
        return sum(map(len, self._encoded(text)))

    def exact(self, text: str) -> list[int]:
        """The tokenizer's own encoding of the whole text (the reference `encode` must equal)."""
        return list(self.backend.encode(text, add_special_tokens=False).ids)

    def token_at(self, text: str, char_index: int) -> int | None:
        """Index of the first token that ends after `char_index`, or None if none does."""
        encoded = self._encoded(text)
        chunks = self.chunks(text)
        starts = [0, *accumulate(map(len, chunks))]
        k = max(0, bisect_right(starts, char_index) - 1)
        tokens_before = sum(map(len, encoded[:k]))
        for chunk, start, ids in zip(chunks[k:], starts[k:], encoded[k:], strict=False):
            offsets = self.backend.encode(chunk, add_special_tokens=False).offsets
            for index, (_begin, end) in enumerate(offsets):
                if start + end > char_index:
                    return tokens_before + index
            tokens_before += len(ids)
        return None
