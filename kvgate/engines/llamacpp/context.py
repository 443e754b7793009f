"""One GGUF model and its llama.cpp contexts, through llama-cpp-python's C bindings (`llama_cpp`).

`GGUFModel` is loaded once per run and only read. A `Context` is one arm session's cache namespace: its own
KV memory (one sequence, id 0), created empty with the arm's K and V cache types, freed at the end of the
session. Everything kvgate checks about a context it reads back from llama.cpp: the positions the memory
holds (`llama_memory_seq_pos_min/max`), the prompt tokens llama.cpp evaluated (its performance counters),
the sequence's state bytes, and the KV types it reported allocating.
"""

from __future__ import annotations

import ctypes
import logging
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from kvgate.engines.llamacpp.kv_types import ggml_type_id

SEQ = 0
"""The one sequence every context holds."""
KV_REPORT = re.compile(r"K \((\w+)\):\s*[\d.]+ MiB, V \((\w+)\):\s*[\d.]+ MiB")
"""llama.cpp's line when it allocates a KV cache: `… K (q8_0): 1.00 MiB, V (q8_0): 1.00 MiB`."""
DEBUG_LEVEL, ERROR_LEVEL, CONTINUED_LEVEL = 1, 4, 5
"""`enum ggml_log_level`: DEBUG (dropped), ERROR (reaches stderr), CONT (the previous message goes on)."""


class LogTap:
    """llama.cpp's log, kept in memory: its errors go to stderr, its information and warnings only to
    `lines` (the last 400; `count` of every one so far); its debug lines are dropped."""

    def __init__(self) -> None:
        import llama_cpp

        self.lines: deque[str] = deque(maxlen=400)
        self.count = 0
        self.keeping = False

        @llama_cpp.llama_log_callback
        def record(level: int, text: bytes, _user: Any) -> None:
            self.keeping = self.keeping if level == CONTINUED_LEVEL else level != DEBUG_LEVEL
            if not self.keeping:
                return
            line = text.decode("utf-8", errors="replace")
            self.lines.append(line)
            self.count += 1
            if level == ERROR_LEVEL:
                logging.getLogger("kvgate.llamacpp").error(line.rstrip())

        self._callback = record  # held: llama.cpp keeps only the pointer
        llama_cpp.llama_log_set(record, ctypes.c_void_p(0))

    def since(self, count: int) -> list[str]:
        """The lines logged after the first `count` (those still kept)."""
        return list(self.lines)[max(0, len(self.lines) - (self.count - count)) :]

    def kv_types(self, count: int) -> tuple[str, str] | None:
        """The (K, V) cache types of the last KV allocation logged after the first `count` lines, or None."""
        for line in reversed(self.since(count)):
            match = KV_REPORT.search(line)
            if match:
                return match.group(1), match.group(2)
        return None


@cache
def process_log() -> LogTap:
    """The process's one tap on llama.cpp's log (llama.cpp has a single log callback per process)."""
    return LogTap()


@dataclass(frozen=True)
class ContextSettings:
    """A context's size and threads: `n_ctx` positions, prompts evaluated `n_batch` tokens at a time."""

    n_ctx: int
    n_batch: int
    threads: int
    flash_attn: bool


class GGUFModel:
    """A GGUF file loaded by llama.cpp (weights memory-mapped), with its vocabulary."""

    def __init__(self, path: Path, n_gpu_layers: int = 0) -> None:
        import llama_cpp

        llama_cpp.llama_backend_init()
        self.log = process_log()
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers
        self.path = path
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not self.model:
            tail = "".join(list(self.log.lines)[-3:]).strip()
            raise ValueError(f"llama.cpp could not load {path}" + (f": {tail}" if tail else ""))
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self.n_layer = int(llama_cpp.llama_model_n_layer(self.model))
        self.n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(self.model))

    def is_end(self, token: int) -> bool:
        """Whether `token` ends generation (llama.cpp's end-of-generation set: EOS, EOT and the like)."""
        import llama_cpp

        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The text of `tokens`, special tokens not rendered."""
        import llama_cpp

        if not tokens:
            return ""
        ids = (llama_cpp.llama_token * len(tokens))(*tokens)
        size = 16 * len(tokens) + 16
        for _ in range(2):
            buffer = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_detokenize(self.vocab, ids, len(tokens), buffer, size, False, False)
            if n >= 0:
                return buffer.raw[:n].decode("utf-8", errors="replace")
            size = -n + 1
        raise RuntimeError("llama_detokenize kept asking for a larger buffer")

    def close(self) -> None:
        import llama_cpp

        if self.model:
            llama_cpp.llama_model_free(self.model)
            self.model = None


class Context:
    """A fresh llama.cpp context on `model`: an empty KV memory with cache types `type_k`, `type_v`."""

    def __init__(self, model: GGUFModel, settings: ContextSettings, type_k: str, type_v: str) -> None:
        import llama_cpp

        self.model, self.settings = model, settings
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = settings.n_ctx
        params.n_batch = params.n_ubatch = settings.n_batch
        params.n_seq_max = 1
        params.n_threads = params.n_threads_batch = settings.threads
        params.type_k, params.type_v = ggml_type_id(type_k), ggml_type_id(type_v)
        params.flash_attn_type = (
            llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
            if settings.flash_attn
            else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        params.no_perf = False  # the performance counters count evaluated tokens
        since = model.log.count
        self.ctx = llama_cpp.llama_init_from_model(model.model, params)
        if not self.ctx:
            tail = "".join(model.log.since(since)[-3:]).strip()
            raise ValueError(
                f"llama.cpp refused a context with K {type_k}, V {type_v}" + (f": {tail}" if tail else "")
            )
        self.reported_kv_types = model.log.kv_types(since)
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(settings.n_batch, 0, 1)
        self._start_counters()

    def _start_counters(self) -> None:
        """llama.cpp reports each of its counters as at least 1, so a fresh context's "1" may mean 0: it
        first evaluates two tokens together and one alone, then forgets them, so both count for real."""
        self.decode([0, 0], 0)
        self.decode([0], 2)
        self.clear()

    def decode(self, tokens: Sequence[int], start: int) -> np.ndarray:
        """Evaluate `tokens` at positions start, start + 1, …; the last one's logits [n_vocab] (float32)."""
        import llama_cpp

        if not tokens:
            raise ValueError("nothing to decode")
        step = self.settings.n_batch
        for begin in range(0, len(tokens), step):
            chunk = tokens[begin : begin + step]
            batch = self.batch
            for j, token in enumerate(chunk):
                batch.token[j] = token
                batch.pos[j] = start + begin + j
                batch.n_seq_id[j] = 1
                batch.seq_id[j][0] = SEQ
                batch.logits[j] = 0
            batch.logits[len(chunk) - 1] = int(begin + step >= len(tokens))
            batch.n_tokens = len(chunk)
            code = llama_cpp.llama_decode(self.ctx, batch)
            if code != 0:
                raise RuntimeError(f"llama_decode returned {code} at position {start + begin}")
        logits = llama_cpp.llama_get_logits_ith(self.ctx, -1)
        return np.ctypeslib.as_array(logits, shape=(self.model.n_vocab,)).copy()

    def positions(self) -> tuple[int, int]:
        """(first, last) position the sequence holds in llama.cpp's memory; (-1, -1) when empty."""
        import llama_cpp

        return (
            int(llama_cpp.llama_memory_seq_pos_min(self.memory, SEQ)),
            int(llama_cpp.llama_memory_seq_pos_max(self.memory, SEQ)),
        )

    def cached(self) -> int:
        """How many positions llama.cpp's memory holds for the sequence (they are contiguous from 0)."""
        first, last = self.positions()
        if last < 0:
            return 0
        if first != 0:
            raise RuntimeError(f"llama.cpp's memory holds positions {first}–{last}, not from 0")
        return last + 1

    def evaluated(self) -> int:
        """Tokens llama.cpp has evaluated in this context (its counters: prompt batches and single tokens)."""
        import llama_cpp

        perf = llama_cpp.llama_perf_context(self.ctx)
        return int(perf.n_p_eval) + int(perf.n_eval)

    def clear(self) -> None:
        """Empty the KV memory (positions and data)."""
        import llama_cpp

        llama_cpp.llama_memory_clear(self.memory, True)

    def remove(self, start: int, end: int = -1) -> None:
        """Remove positions [start, end) (end −1: to the end) from the sequence."""
        import llama_cpp

        if not llama_cpp.llama_memory_seq_rm(self.memory, SEQ, start, end):
            raise RuntimeError(f"llama.cpp could not remove positions [{start}, {end}) of the sequence")

    def shift(self, start: int, end: int, delta: int) -> None:
        """Move positions [start, end) by `delta` (llama.cpp re-rotates their keys at the next decode)."""
        import llama_cpp

        llama_cpp.llama_memory_seq_add(self.memory, SEQ, start, end, delta)

    def can_shift(self) -> bool:
        import llama_cpp

        return bool(llama_cpp.llama_memory_can_shift(self.memory))

    def state_size(self) -> int:
        """Bytes of the sequence's state in llama.cpp's format (what `state()` would return)."""
        import llama_cpp

        return int(llama_cpp.llama_state_seq_get_size(self.ctx, SEQ))

    def state(self) -> bytes:
        """The sequence's state in llama.cpp's own format (its cells, then each layer's K and V rows)."""
        import llama_cpp

        size = int(llama_cpp.llama_state_seq_get_size(self.ctx, SEQ))
        buffer = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_seq_get_data(self.ctx, buffer, size, SEQ))
        if written == 0 or written > size:
            raise RuntimeError(f"llama.cpp wrote {written} bytes of a {size}-byte sequence state")
        return ctypes.string_at(buffer, written)

    def load_state(self, data: bytes) -> None:
        """Replace the sequence with a state `state()` returned (in this or another context alike)."""
        import llama_cpp

        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if int(llama_cpp.llama_state_seq_set_data(self.ctx, buffer, len(data), SEQ)) != len(data):
            raise RuntimeError("llama.cpp did not accept the sequence state")

    def save_file(self, path: Path, tokens: Sequence[int]) -> int:
        """Write the sequence's state and its `tokens` to `path` in llama.cpp's session-file format."""
        import llama_cpp

        ids = (llama_cpp.llama_token * len(tokens))(*tokens)
        name = str(path).encode()
        written = int(llama_cpp.llama_state_seq_save_file(self.ctx, name, SEQ, ids, len(tokens)))
        if written == 0:
            raise OSError(f"llama.cpp could not write the sequence state to {path}")
        return written

    def load_file(self, path: Path, capacity: int) -> list[int]:
        """Load a state `save_file` wrote into the sequence; the tokens stored with it."""
        import llama_cpp

        ids = (llama_cpp.llama_token * max(capacity, 1))()
        count = ctypes.c_size_t(0)
        read = llama_cpp.llama_state_seq_load_file(
            self.ctx, str(path).encode(), SEQ, ids, capacity, ctypes.byref(count)
        )
        if int(read) == 0:
            raise OSError(f"llama.cpp could not load the sequence state from {path}")
        return list(ids[: count.value])

    def close(self) -> None:
        import llama_cpp

        if self.ctx:
            llama_cpp.llama_batch_free(self.batch)
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
