"""Prefix reuse in llama.cpp: a session's prompts kept as saved sequence states, found by their tokens.

What llama-server's prompt cache and llama-cpp-python's `LlamaRAMCache` do: a new prompt starts from the
stored state that shares its longest token prefix (`llama_state_seq_set_data`), the positions after that
prefix are removed (`llama_memory_seq_rm`), and only the rest is evaluated. The sequence left in the
context by the previous case counts as one more entry. The last prompt token is always evaluated, since
its logits start decoding. The store belongs to one session (its namespace) and is bounded in bytes,
least recently used first out.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from kvgate.engines.llamacpp.context import Context


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class PrefixStore:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self.live: tuple[int, ...] = ()
        """The prompt whose positions the context holds now (none until a prompt is kept)."""

    def seat(self, ctx: Context, prompt: Sequence[int]) -> int:
        """Leave in `ctx` the longest stored prefix of `prompt` (not its last token); that prefix's length."""
        limit = max(len(prompt) - 1, 0)
        best_key, best = None, common_prefix(self.live, prompt)
        for key in self.entries:
            shared = common_prefix(key, prompt)
            if shared > best:
                best_key, best = key, shared
        best = min(best, limit)
        if best_key is not None and best > 0:
            ctx.clear()
            ctx.load_state(self.entries[best_key])
            self.entries.move_to_end(best_key)
            self.live = best_key
        if best == 0:
            ctx.clear()
            self.live = ()
        else:
            ctx.remove(best)
            self.live = self.live[:best]
        return best

    def keep(self, ctx: Context, prompt: Sequence[int]) -> None:
        """Store the state `ctx` holds now, which is exactly `prompt` evaluated."""
        key = tuple(prompt)
        state = ctx.state()
        self.live = key
        if len(state) > self.max_bytes:
            return
        self.entries[key] = state
        self.entries.move_to_end(key)
        while sum(len(s) for s in self.entries.values()) > self.max_bytes:
            self.entries.popitem(last=False)

    def clear(self) -> None:
        self.entries.clear()
        self.live = ()
