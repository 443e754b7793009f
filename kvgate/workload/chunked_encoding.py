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
from itertools import chain
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
    and the last `" " + pieces[-1]`. Middle chunks' ids and lengths are cached by piece, the first and
    last chunk by text.
    """

    def __init__(self, backend: Any, chunked: bool | None = None) -> None:
        self.backend = backend
        self.chunked = splits_at_sentence_ends(backend) if chunked is None else chunked
        self._ids: dict[str, list[int]] = {}
        self._lengths: dict[str, int] = {}
        self._edges: dict[str, list[int]] = {}

    def _pieces(self, text: str) -> list[str]:
        return text.split(". ") if self.chunked else [text]

    def chunks(self, text: str) -> list[str]:
        pieces = self._pieces(text)
        return pieces if len(pieces) == 1 else [_chunk(pieces, i) for i in range(len(pieces))]

    def _ends(self, pieces: list[str]) -> tuple[list[int], list[int]]:
        """Ids of the first and last chunk of a split text (a prompt's template head and tail)."""
        return self._edge(pieces[0] + "."), self._edge(" " + pieces[-1])

    def _edge(self, chunk: str) -> list[int]:
        ids = self._edges.get(chunk)
        if ids is None:
            if len(self._edges) > MAX_CACHED_CHUNKS:
                self._edges.clear()
            ids = self._edges[chunk] = self._encode([chunk])[0]
        return ids

    def _cache(self, middle: list[str]) -> None:
        """Encode the middle pieces not cached yet."""
        missing = [p for p in dict.fromkeys(middle) if p not in self._lengths]
        if len(self._lengths) + len(missing) + len(self._edges) > MAX_CACHED_CHUNKS:
            self._ids.clear()
            self._lengths.clear()
            self._edges.clear()
            missing = list(dict.fromkeys(middle))
        for piece, ids in zip(missing, self._encode([" " + p + "." for p in missing]), strict=True):
            self._ids[piece] = ids
            self._lengths[piece] = len(ids)

    def _encode(self, texts: list[str]) -> list[list[int]]:
        """One call per text for a few (a batch call's thread-pool start-up costs more), else a batch."""
        if len(texts) < 16:
            return [self.backend.encode(t, add_special_tokens=False).ids for t in texts]
        return [e.ids for e in self.backend.encode_batch(texts, add_special_tokens=False)]

    def encode(self, text: str) -> list[int]:
        pieces = self._pieces(text)
        if len(pieces) == 1:
            return self.exact(text)
        middle = pieces[1:-1]
        try:
            body = list(chain.from_iterable(map(self._ids.__getitem__, middle)))
        except KeyError:
            self._cache(middle)
            body = list(chain.from_iterable(map(self._ids.__getitem__, middle)))
        first, last = self._ends(pieces)
        return first + body + last

    def count(self, text: str) -> int:
        pieces = self._pieces(text)
        if len(pieces) == 1:
            return len(self.exact(text))
        first, last = self._ends(pieces)
        return len(first) + self._middle_count(pieces[1:-1]) + len(last)

    def exact(self, text: str) -> list[int]:
        """The tokenizer's own encoding of the whole text (the reference `encode` must equal)."""
        return list(self.backend.encode(text, add_special_tokens=False).ids)

    def token_at(self, text: str, char_index: int) -> int | None:
        """Index of the first token that ends after `char_index`, or None if none does.

        Walks back from the end to the chunk holding `char_index` (questions sit near the end), counts
        the tokens before it from the cache, and encodes only that chunk (and any after it, should none
        of its tokens end past `char_index`) with offsets.
        """
        pieces = self._pieces(text)
        k, start = len(pieces) - 1, len(text) - len(pieces[-1]) - (len(pieces) > 1)
        while k > 0 and start > char_index:
            k -= 1
            start -= len(pieces[k]) + 2  # the middle chunk " " + piece + "."
        tokens_before = 0
        if k > 0:
            tokens_before = len(self._ends(pieces)[0]) + self._middle_count(pieces[1:k])
        else:
            start = 0
        for i in range(k, len(pieces)):
            chunk = _chunk(pieces, i)
            offsets = self.backend.encode(chunk, add_special_tokens=False).offsets
            for index, (_begin, end) in enumerate(offsets):
                if start + end > char_index:
                    return tokens_before + index
            tokens_before += len(offsets)
            start += len(chunk)
        return None

    def _middle_count(self, middle: list[str]) -> int:
        try:
            return sum(map(self._lengths.__getitem__, middle))
        except KeyError:
            self._cache(middle)
            return sum(map(self._lengths.__getitem__, middle))


def _chunk(pieces: list[str], i: int) -> str:
    """Chunk `i` of a text split into `pieces` at ". " (see `ChunkedEncoder`)."""
    if len(pieces) == 1:
        return pieces[0]
    if i == 0:
        return pieces[0] + "."
    return " " + pieces[i] + ("." if i < len(pieces) - 1 else "")
