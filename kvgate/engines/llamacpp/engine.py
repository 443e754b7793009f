"""The `llamacpp` engine: llama.cpp in-process (llama-cpp-python), greedy on the frozen token ids.

The GGUF model is loaded once per run (the embedded model from its own GGUF, no conversion) and only read.
Each arm session gets a fresh llama.cpp context, its cache namespace: an empty KV memory allocated in the
arm's K and V cache types, flash attention as the engine was told (on by default: llama.cpp quantises V
only with it), freed when the session closes. One case, in order:

1. seat: a non-reuse arm empties the memory; a reuse arm keeps the longest prefix it stored
   (`prefix_store.py`). The positions llama.cpp's memory then holds are the case's cached tokens;
2. prefill the rest of the prompt (for scope "context", the context alone), last token's logits kept;
3. eviction: llama.cpp's context shift at the treatment's ratio (`context_shift.py`); for scope "context"
   the question is prefilled after it, at the shifted positions;
4. offload: the sequence's state to host memory or disk and back, checksummed (`state_offload.py`);
5. decode greedily from the prefill's logits until an end-of-generation token or `max_new_tokens`.

Each case's proof of treatment (`report/proof.py`) is llama.cpp's: the sequence state's bytes after the
treatment (`kv_bytes`), the KV types (`kv_dtype`, "K+V" when they differ), the positions held in a block
type (`n_kv_quantized`), and the offloaded positions in blocks of the offload's `block_size`, written and
read back once the checksum held (`n_tier_written`, `n_tier_read`).

llama.cpp's counters are checked on every case (`counters.py`): cached plus evaluated prompt tokens make the
prompt, a non-reuse arm never starts with positions of an earlier case; and once per session the KV types
llama.cpp reported allocating, and the bytes a cached token takes in its state, are the arm's. A
contradiction raises EngineFailure naming the arm.
"""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kvgate.engines.base import ArmSetup, Generation
from kvgate.engines.case_timeout import check_timeout
from kvgate.engines.llamacpp.context import Context, ContextSettings, GGUFModel
from kvgate.engines.llamacpp.context_shift import Shift, plan_shift
from kvgate.engines.llamacpp.counters import (
    kv_type_contradiction,
    prompt_contradiction,
    state_size_contradiction,
)
from kvgate.engines.llamacpp.kv_types import LAYOUTS, arm_kv_types, kv_dtype_refusal
from kvgate.engines.llamacpp.prefix_store import PrefixStore
from kvgate.engines.llamacpp.state_offload import round_trip
from kvgate.engines.registry import registered_name
from kvgate.errors import BadInput, EngineFailure, TreatmentRefused
from kvgate.models import ModelSpec
from kvgate.treatments.spec import (
    GGML_BLOCK_TYPES,
    Eviction,
    Offload,
    Quantize,
    Reuse,
    Treatment,
)
from kvgate.workload.case import Case

N_CTX = 8192
"""Most positions a context holds unless -E n_ctx says otherwise (the model's training context if less)."""
N_BATCH = 512
REUSE_CACHE_BYTES = 1 << 30
"""Default bound of a reuse arm's stored prompt states (LRU beyond it)."""
CELL_BYTES = 64
"""Most bytes of bookkeeping llama.cpp's sequence state may add per cached token (position, sequences)."""
PLANTED_REUSE_FAULT = "reuse_across_cases"
"""A planted fault (in ArmSetup.faults): keep the previous prompt's common prefix on a non-reuse arm, as
`Llama.generate` does by default, to prove the counters catch it."""
CORRUPT_OFFLOAD_FAULT = "corrupt_offload"
"""A planted fault: flip one bit of every offloaded state, to prove the checksum catches it."""


def default_threads() -> int:
    """Every core this process may use but one (at least one)."""
    return max(1, len(os.sched_getaffinity(0)) - 1)


def _positive(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BadInput(f"llamacpp engine: {name} must be an integer ≥ 1, got {value!r}")
    return value


def gguf_file(model: ModelSpec) -> Path:
    """The GGUF file of `model`: the embedded model's own, or a local `.gguf` path."""
    if model.is_gguf():
        return model.gguf_path()
    raise BadInput(
        f"the llamacpp engine loads a GGUF file; model {model.name!r} is not one: name the embedded model "
        "(smollm2-135m) or a .gguf file"
    )


class LlamaCppEngine:
    """llama.cpp through llama-cpp-python. Options (`-E key=value`): threads, n_ctx (positions per
    context; default the model's training context, at most N_CTX), n_batch (prompt tokens per evaluation),
    flash_attn, n_gpu_layers, reuse_cache_bytes (a reuse arm's stored states), timeout_s (a case still
    decoding after it is stored as a timeout)."""

    name = registered_name(__module__, __qualname__)

    def __init__(
        self,
        model: ModelSpec,
        /,
        threads: int | None = None,
        n_ctx: int | None = None,
        n_batch: int = N_BATCH,
        flash_attn: bool = True,
        n_gpu_layers: int = 0,
        reuse_cache_bytes: int = REUSE_CACHE_BYTES,
        timeout_s: float | None = None,
    ) -> None:
        if not isinstance(flash_attn, bool):
            raise BadInput(f"llamacpp engine: flash_attn must be true or false, got {flash_attn!r}")
        if not isinstance(n_gpu_layers, int) or isinstance(n_gpu_layers, bool) or n_gpu_layers < 0:
            raise BadInput(f"llamacpp engine: n_gpu_layers must be an integer ≥ 0, got {n_gpu_layers!r}")
        if not isinstance(reuse_cache_bytes, int) or reuse_cache_bytes < 0:
            raise BadInput(
                f"llamacpp engine: reuse_cache_bytes must be an integer ≥ 0, got {reuse_cache_bytes!r}"
            )
        positions = None if n_ctx is None else _positive("n_ctx", n_ctx)
        batch = _positive("n_batch", n_batch)
        cpu_threads = _positive("threads", threads) if threads is not None else default_threads()
        self.n_gpu_layers = n_gpu_layers
        self.reuse_cache_bytes = reuse_cache_bytes
        self.timeout_s = check_timeout("llamacpp", timeout_s)
        self.path = gguf_file(model)
        _quiet_library_logger()
        try:
            self.model = GGUFModel(self.path, n_gpu_layers)
        except ValueError as exc:
            raise BadInput(f"llamacpp engine: {exc}") from None
        positions = positions or min(self.model.n_ctx_train or N_CTX, N_CTX)
        self.settings = ContextSettings(positions, min(batch, positions), cpu_threads, flash_attn)
        self.row_values = _kv_row_values(self.model)
        self.can_shift = self._probe_shift()

    def refusal(self, treatment: Treatment) -> str | None:
        parts = treatment.parts()
        for part in parts:
            reason = self._part_refusal(part)
            if reason:
                return reason if part is treatment else f"part {part.name!r}: {reason}"
        kinds = {p.kind for p in parts}
        if "reuse" in kinds and "eviction" in kinds:
            return "a shifted context no longer holds its prompt's prefix: reuse cannot follow eviction"
        given = [p.name for p in (*parts, treatment) if p.engine_args]
        if given:
            return f"treatment {given[0]!r} sets engine_args, which the llamacpp engine does not take"
        return None

    def _part_refusal(self, part: Treatment) -> str | None:
        if isinstance(part, Eviction):
            if part.method != "streaming":
                return (
                    "llama.cpp's context shift keeps the first n_keep tokens and the most recent ones: "
                    f"method 'streaming' only, not {part.method!r}"
                )
            if part.during_decoding or part.certificate:
                return "llama.cpp's context shift runs once after prefill here (no decoding-time eviction "
                "and no certificate: those need the hf engine)"
            if not self.can_shift:
                return "llama.cpp cannot shift this model's context (llama_memory_can_shift is false)"
        if isinstance(part, Quantize) and (refused := kv_dtype_refusal(part.dtype)):
            return refused
        if (
            isinstance(part, Quantize)
            and not self.settings.flash_attn
            and part.value_dtype
            not in (
                "f32",
                "f16",
                "bf16",
            )
        ):
            return "llama.cpp quantises the V cache only with flash attention (-E flash_attn=true)"
        if isinstance(part, Reuse) and part.mode != "prefix":
            return "llama.cpp reuses a prompt's prefix only, not spans at other offsets"
        return None

    def fingerprint(self) -> dict[str, Any]:
        import llama_cpp

        settings = self.settings
        limit = {"timeout_s": self.timeout_s} if self.timeout_s is not None else {}
        return {
            "engine": self.name,
            "llama_cpp_python": llama_cpp.__version__,
            "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
            "gguf": self.path.name,
            "n_ctx": settings.n_ctx,
            "n_batch": settings.n_batch,
            "threads": settings.threads,
            "flash_attn": settings.flash_attn,
            "n_gpu_layers": self.n_gpu_layers,
            "machine": platform.machine(),
            **limit,
        }

    def open(self, setup: ArmSetup) -> LlamaCppSession:
        reason = self.refusal(setup.treatment)
        if reason:
            raise TreatmentRefused(f"engine 'llamacpp' refuses arm {setup.arm!r}: {reason}")
        return LlamaCppSession(self, setup)

    def close(self) -> None:
        self.model.close()

    def _probe_shift(self) -> bool:
        ctx = Context(self.model, ContextSettings(256, 256, 1, self.settings.flash_attn), "f16", "f16")
        try:
            return ctx.can_shift()
        finally:
            ctx.close()


class LlamaCppSession:
    """One arm and replicate: a fresh context (its namespace), closed with the session."""

    def __init__(self, engine: LlamaCppEngine, setup: ArmSetup) -> None:
        self.engine, self.setup = engine, setup
        parts = setup.treatment.parts()
        self.kv_types = arm_kv_types(setup.treatment)
        k, v = self.kv_types
        self.kv_dtype = k if k == v else f"{k}+{v}"
        self.quantised = k in GGML_BLOCK_TYPES or v in GGML_BLOCK_TYPES
        self.eviction = next((p for p in parts if isinstance(p, Eviction)), None)
        self.offload = next((p for p in parts if isinstance(p, Offload)), None)
        self.reuses = any(isinstance(p, Reuse) for p in parts)
        planted = bool(setup.faults.get(PLANTED_REUSE_FAULT, False))
        self.store = (
            PrefixStore(engine.reuse_cache_bytes) if self.reuses else PrefixStore(0) if planted else None
        )
        self.directory = Path(tempfile.mkdtemp(prefix="kvgate-llamacpp-")) if self.offload else None
        self.proven = False
        try:
            self.ctx = Context(engine.model, engine.settings, *self.kv_types)
        except ValueError as exc:
            raise EngineFailure(f"arm {setup.arm!r}: {exc}") from None
        self.empty_state_size = self.ctx.state_size()

    def generate(self, cases: Sequence[Case]) -> list[Generation]:
        out = []
        for case in cases:
            try:
                out.append(self._one(case))
            except (RuntimeError, ValueError, OSError) as exc:
                self.ctx.clear()
                if self.store is not None:
                    self.store.live = ()
                out.append(Generation.failed(case, f"{type(exc).__name__}: {exc}"))
        return out

    def close(self) -> None:
        self.ctx.close()
        if self.store is not None:
            self.store.clear()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _one(self, case: Case) -> Generation:
        if case.prompt_token_ids is None:
            raise ValueError("case has no prompt_token_ids: freeze the workload with --model")
        ids = list(case.prompt_token_ids)
        n, ctx = len(ids), self.ctx
        needed = n + case.max_new_tokens
        if needed > ctx.settings.n_ctx:
            raise ValueError(
                f"prompt and output need {needed} positions; the context holds {ctx.settings.n_ctx} "
                "(-E n_ctx=…)"
            )
        start = time.perf_counter()
        if self.store is not None:
            self.store.seat(ctx, ids)
        else:
            ctx.clear()
        cached = ctx.cached()
        before = ctx.evaluated()
        span = _compressed_span(self.eviction, case, n)
        logits = ctx.decode(ids[cached:span], cached) if cached < span else None
        if self.store is not None:
            self.store.keep(ctx, ids)
        shift = None
        if self.eviction is not None:
            shift = plan_shift(span, self.eviction)
            _apply_shift(ctx, shift)
        if span < n:
            logits = ctx.decode(ids[span:], span - (shift.n_discard if shift else 0))
        problem = prompt_contradiction(
            self.setup.arm, self.reuses, case.case_id, n, cached, ctx.evaluated() - before
        )
        if problem is None and not self.proven:
            problem = self._treatment_contradiction(n, shift)
        if problem:
            raise EngineFailure(problem)
        if logits is None:
            raise RuntimeError("prefill produced no logits")
        kept = ctx.cached()
        kv_bytes = ctx.state_size() - self.empty_state_size
        blocks = 0
        if self.offload is not None:
            kept_ids = [ids[p] for p in shift.kept_positions()] + ids[span:] if shift else ids
            corrupt = bool(self.setup.faults.get(CORRUPT_OFFLOAD_FAULT, False))
            round_trip(ctx, self.offload.tier, self.directory, kept_ids, plant_corruption=corrupt)
            blocks = -(-kept // self.offload.block_size)  # every position went out and came back
        tokens, logprobs, ttft = self._decode(case, logits, kept, start)
        if tokens is None:
            return Generation.timeout(case, float(self.engine.timeout_s or 0), time.perf_counter() - start)
        latency = time.perf_counter() - start
        held = ctx.cached()  # the prompt's kept positions and the generated tokens decoded into the cache
        if self.store is not None:
            ctx.remove(n)  # leave the prompt alone in the context: the next case may reuse its prefix
        return Generation(
            output_text=self.engine.model.detokenize(tokens),
            output_token_ids=tuple(tokens),
            n_prompt_tokens=n,
            n_cached_tokens=cached,
            n_kv_entries_kept=kept,
            ttft_s=ttft,
            latency_s=latency,
            mean_logprob=sum(logprobs) / len(logprobs) if logprobs else None,
            min_logprob=min(logprobs) if logprobs else None,
            kv_bytes=kv_bytes,
            kv_dtype=self.kv_dtype,
            n_kv_quantized=held if self.quantised else 0,
            n_tier_written=blocks,
            n_tier_read=blocks,
            n_spans_reused=0,
        )

    def _decode(
        self, case: Case, logits: np.ndarray, position: int, start: float
    ) -> tuple[list[int] | None, list[float], float]:
        """Greedy tokens from the prefill's `logits`, the next at `position`: (tokens or None when the case
        ran past the time limit, their logprobs, time to the first token)."""
        tokens: list[int] = []
        logprobs: list[float] = []
        ttft = 0.0
        limit = self.engine.timeout_s
        for step in range(case.max_new_tokens):
            logp = _log_softmax(logits)
            token = int(np.argmax(logp))
            if step == 0:
                ttft = time.perf_counter() - start
            if self.engine.model.is_end(token):
                break
            tokens.append(token)
            logprobs.append(float(logp[token]))
            if step + 1 == case.max_new_tokens:
                break
            if limit is not None and time.perf_counter() - start > limit:
                return None, logprobs, ttft
            logits = self.ctx.decode([token], position + step)
        return tokens, logprobs, ttft

    def _treatment_contradiction(self, n: int, shift: Shift | None) -> str | None:
        """Once per session: the KV types llama.cpp allocated and the bytes per cached token are the arm's."""
        arm = self.setup.arm
        problem = kv_type_contradiction(arm, self.kv_types, self.ctx.reported_kv_types)
        if problem:
            return problem
        held = self.ctx.cached()
        if held != n - (shift.n_discard if shift else 0):
            return f"arm {arm!r}: llama.cpp holds {held} positions after the treatment, expected " + str(
                n - (shift.n_discard if shift else 0)
            )
        self.proven = True
        if held == 0:
            return None
        measured = (self.ctx.state_size() - self.empty_state_size) / held
        return state_size_contradiction(arm, self._row_bytes(), measured, CELL_BYTES)

    def _row_bytes(self) -> int:
        k, v = (LAYOUTS[t] for t in self.kv_types)
        values = self.engine.row_values
        return self.engine.model.n_layer * (k.row_bytes(values) + v.row_bytes(values))


def _apply_shift(ctx: Context, shift: Shift) -> None:
    """llama.cpp's context shift: remove [n_keep, n_keep + n_discard), move the rest down by n_discard."""
    if shift.n_discard == 0:
        return
    end = shift.n_keep + shift.n_discard
    ctx.remove(shift.n_keep, end)
    ctx.shift(end, shift.n, -shift.n_discard)


def _compressed_span(eviction: Eviction | None, case: Case, n: int) -> int:
    """Tokens prefilled before eviction: the context alone for scope "context", else the whole prompt."""
    if eviction is None or eviction.scope != "context":
        return n
    if case.question_start is None or not 0 < case.question_start < n:
        raise ValueError("scope 'context' needs the case's question_start; freeze the workload with --model")
    return case.question_start


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x -= x.max()
    return x - np.log(np.exp(x).sum())


def _kv_row_values(model: GGUFModel) -> int:
    """Values per token per layer in each of K and V: KV heads × head size, from the GGUF's metadata."""
    import llama_cpp

    heads_kv = int(llama_cpp.llama_model_n_head_kv(model.model))
    n_embd = int(llama_cpp.llama_model_n_embd(model.model))
    head_size = n_embd // int(llama_cpp.llama_model_n_head(model.model))
    return heads_kv * head_size


def _quiet_library_logger() -> None:
    """llama-cpp-python's Python logger prints everything llama.cpp logs until told otherwise."""
    import logging

    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
