"""Eviction as llama.cpp's context shift: keep the first `n_keep` tokens and the most recent ones.

llama.cpp frees room in a full context by removing the tokens after the first `n_keep` and shifting the
rest down (`llama_memory_seq_rm`, then `llama_memory_seq_add` with a negative delta, which re-rotates the
kept keys to their new positions). Applied after prefill at an eviction treatment's ratio, that is
StreamingLLM (Xiao et al. 2023, "Efficient Streaming Language Models with Attention Sinks") in a
production engine: `sink_tokens` attention sinks and a recent window, the same entries the hf reference's
`streaming` method keeps. Decoding continues at the shifted positions, as after llama.cpp's own shift.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.treatments.spec import Eviction, kept_entries


@dataclass(frozen=True)
class Shift:
    """Of `n` cached positions keep [0, n_keep) and [n_keep + n_discard, n); the latter move down."""

    n: int
    n_keep: int
    n_discard: int

    @property
    def kept(self) -> int:
        return self.n - self.n_discard

    def kept_positions(self) -> list[int]:
        """The original positions still cached after the shift, ascending."""
        return [*range(self.n_keep), *range(self.n_keep + self.n_discard, self.n)]


def plan_shift(n: int, eviction: Eviction) -> Shift:
    """The shift that removes `eviction.ratio` of `n` positions (kvgate's or kvpress's count), sinks kept.

    When no more entries are kept than there are sinks (prompts of a few tokens), the first ones are kept:
    llama.cpp's `n_keep` is a prefix. (The hf reference then keeps the last sinks under kvgate's tie rule.)
    """
    kept = kept_entries(n, eviction.ratio, eviction.convention)
    n_keep = min(eviction.sink_tokens, kept)
    return Shift(n, n_keep, n - kept)
