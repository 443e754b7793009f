"""The `hf` engine: transformers as the reference that can apply every treatment.

Greedy decoding in an explicit loop so the cache can be changed between steps. The model is loaded once
per run and only read; each arm session starts with empty caches of its own (its namespace). Decoding
after eviction continues at the original next position: `position_ids` carry true positions while the
attention mask follows the shorter cache.

One case, in order: reuse seeds the cache at prefill (prefix or span) → the hooks: eviction, then
quantisation, as the treatment lists them → the rest of the prompt (the question, for scope "context")
→ offload to the slower tier and back, every block checksummed → decode. The prefix cache and the span
store belong to the engine and are shared by its sessions, as one server's cache is; the namespace in
every key keeps the sessions apart, and a closing session drops its entries.
"""

from __future__ import annotations

import contextlib
import platform
import shutil
import tempfile
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import torch

from kvgate.allocator import keep_freed_memory
from kvgate.engines.base import ArmSetup, Generation
from kvgate.engines.case_timeout import check_timeout
from kvgate.engines.hf import onednn_attention
from kvgate.engines.hf.batching import length_batches
from kvgate.engines.hf.cache_hooks import (
    CacheHook,
    EvictHook,
    QuantizeHook,
    build_hooks,
    needs_queries,
    query_window,
)
from kvgate.engines.hf.certificate.observer import CertificateSettings, DecodeCertificate
from kvgate.engines.hf.eviction.head_mask import HeadMask
from kvgate.engines.hf.forward import forward_at
from kvgate.engines.hf.kv_formats.formats import bytes_per_value
from kvgate.engines.hf.kv_formats.refused import kv_dtype_refusal
from kvgate.engines.hf.matvec import MATVECS, transpose_head
from kvgate.engines.hf.offload import DiskTier, HostTier, Tier, round_trip
from kvgate.engines.hf.onednn_linear import default_linear, onednn_available, pack_linears
from kvgate.engines.hf.prefix_cache import PrefixCache, PrefixReuse
from kvgate.engines.hf.rope_shift import rope_shift_refusal, rotary_embedding
from kvgate.engines.hf.scipy_guard import import_model_machinery_without_scipy
from kvgate.engines.hf.span_reuse import SpanReuse, SpanStore
from kvgate.engines.hf.triton_guard import hide_triton_without_gpu
from kvgate.engines.registry import registered_name
from kvgate.errors import BadInput
from kvgate.models import ModelSpec, model_folder
from kvgate.treatments.eviction_methods import EVICTION_METHODS
from kvgate.treatments.spec import Eviction, Offload, Quantize, Reuse, Treatment
from kvgate.workload.case import Case

DTYPES = ("float32", "bfloat16", "float16")
LINEARS = ("torch", "onednn")
"""The decoder's projections: torch's nn.Linear (MKL on CPU), or oneDNN, weights packed (onednn_linear);
by default oneDNN for float32 on a CPU where torch has it (default_linear), else torch."""
ATTENTIONS = ("sdpa", "onednn")
"""Prefill attention: torch's SDPA, or blocks of oneDNN products for every prefill chunk, masked or not
(onednn_attention); by default oneDNN for float32 on a CPU where torch has it, else SDPA; decode steps
are SDPA's either way."""
SUPPORTED_KINDS = ("full", "eviction", "quantize", "offload", "reuse", "composite")
REUSE_CACHE_BYTES = 1 << 30
"""Default bound of the prefix cache and of the span store, each (LRU beyond it)."""
CORRUPT_OFFLOAD_FAULT = "corrupt_offload"
"""A planted fault (in ArmSetup.faults): flip one bit of every offloaded cache, to prove it is caught."""


class Reuser(Protocol):
    def prefill(
        self, case: Case, ids: torch.Tensor, cache: Any, until: int
    ) -> tuple[torch.Tensor | None, int]: ...


@contextlib.contextmanager
def _without_progress_bars() -> Iterator[None]:
    """Hide transformers' progress bars ("Loading weights") while loading: they would land in the
    user's run output. Its warnings still show; the bars come back afterwards if they were on."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def _device(device: Any) -> torch.device:
    """The torch device `-E device=` names, if this machine has it; a BadInput otherwise (moving the
    model to a CUDA device a CPU build of torch lacks was an internal error)."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda", "mps"):
        raise BadInput(f"hf engine: device must be cpu, cuda, cuda:N or mps, got {device!r}")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if parsed.type == "cuda" and (parsed.index or 0) >= gpus:
        raise BadInput(
            f"hf engine: device {device!r}, but torch here sees {gpus} CUDA device(s): use -E device=cpu"
        )
    if parsed.type == "mps" and not torch.backends.mps.is_available():
        raise BadInput(f"hf engine: device {device!r}, but torch here has no MPS: use -E device=cpu")
    return parsed


class HFEngine:
    name = registered_name(__module__, __qualname__)

    def __init__(
        self,
        model: ModelSpec,
        device: str = "cpu",
        dtype: str = "float32",
        reuse_cache_bytes: int = REUSE_CACHE_BYTES,
        threads: int | None = None,
        timeout_s: float | None = None,
        linear: str | None = None,
        attention: str | None = None,
        matvec: str | None = None,
    ) -> None:
        """Options (`kvgate run -E key=value`): device, dtype (float32 | bfloat16 | float16),
        reuse_cache_bytes (bound of the prefix cache and of the span store, each), threads (torch's),
        timeout_s (a case still decoding after it is stored as a timeout), linear (torch | onednn: the
        decoder's projections through oneDNN with packed weights, float32 on CPU; default onednn where
        that applies, else torch: onednn_linear), attention (sdpa | onednn: every prefill chunk's
        attention as blocks of oneDNN products, float32 on CPU; default onednn where that applies,
        else sdpa: onednn_attention), matvec (gemm | gemv: products of one row per sequence, the head's
        and a decode step's, on the prefill's layouts, or on layouts for one row, float32 on CPU;
        default gemm: matvec)."""
        hide_triton_without_gpu()  # before transformers loads torch._dynamo (triton_guard)
        import_model_machinery_without_scipy()  # its object-detection losses' scipy (scipy_guard)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if dtype not in DTYPES:
            raise BadInput(f"hf engine: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if linear is not None and linear not in LINEARS:
            raise BadInput(f"hf engine: linear must be one of {', '.join(LINEARS)}, got {linear!r}")
        if linear == "onednn" and (device != "cpu" or dtype != "float32" or not onednn_available()):
            raise BadInput(
                "hf engine: linear=onednn packs float32 weights for the CPU (and needs torch built with "
                "oneDNN): use it with device=cpu and dtype=float32, or leave linear at torch"
            )
        if attention is not None and attention not in ATTENTIONS:
            raise BadInput(f"hf engine: attention must be one of {', '.join(ATTENTIONS)}, got {attention!r}")
        cpu_float32 = device == "cpu" and dtype == "float32"
        if attention == "onednn" and not (cpu_float32 and onednn_attention.available()):
            raise BadInput(
                "hf engine: attention=onednn computes float32 prefill attention on the CPU (and needs torch "
                "built with oneDNN): use it with device=cpu and dtype=float32, or leave attention at sdpa"
            )
        if matvec is not None and matvec not in MATVECS:
            raise BadInput(f"hf engine: matvec must be one of {', '.join(MATVECS)}, got {matvec!r}")
        if matvec == "gemv" and not cpu_float32:
            raise BadInput(
                "hf engine: matvec=gemv lays out float32 weights for the CPU: use it with device=cpu "
                "and dtype=float32, or leave matvec at gemm"
            )
        if not isinstance(reuse_cache_bytes, int) or reuse_cache_bytes < 0:
            raise BadInput(f"hf engine: reuse_cache_bytes must be an integer ≥ 0, got {reuse_cache_bytes!r}")
        if threads is not None:
            if not isinstance(threads, int) or threads < 1:
                raise BadInput(f"hf engine: threads must be an integer ≥ 1, got {threads!r}")
            torch.set_num_threads(threads)
        self.timeout_s = check_timeout("hf", timeout_s)
        self.device = _device(device)
        folder = model_folder(model)
        self.model_spec = model
        self.dtype = dtype
        with _without_progress_bars():
            self.tokenizer: Any = AutoTokenizer.from_pretrained(str(folder))
            self.model: Any = cast(
                Any, AutoModelForCausalLM.from_pretrained(str(folder), dtype=getattr(torch, dtype))
            )
        self.model.to(self.device).eval()
        self.linear = linear or default_linear(device, dtype)
        self.matvec = matvec or "gemm"
        one_row = self.matvec == "gemv"
        if self.linear == "onednn":
            pack_linears(self.model, head=not one_row, one_row=one_row)
        if one_row:
            transpose_head(self.model)
        self.attention = attention or onednn_attention.default_attention(device, dtype)
        if self.attention == "onednn":  # attn_implementation in the fingerprint names it too
            self.model.set_attn_implementation(onednn_attention.register())
        # Every forward frees its activations and allocates them again: glibc keeping freed blocks
        # spares a 1,011-token prefill ≈150K page faults (bench/control_vs_vllm.py).
        self.keeps_freed_memory = keep_freed_memory()
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) | {self.tokenizer.eos_token_id}
        self.prefix_cache = PrefixCache(reuse_cache_bytes)
        self.span_store = SpanStore(reuse_cache_bytes)

    def refusal(self, treatment: Treatment) -> str | None:
        parts = treatment.parts()
        for part in parts:
            if part.kind not in SUPPORTED_KINDS:
                return f"the hf engine does not apply {part.kind} treatments"
            if isinstance(part, Quantize) and (refused := kv_dtype_refusal(part.dtype)):
                return refused
        evictions = [p for p in parts if isinstance(p, Eviction)]
        if any(p.certificate and EVICTION_METHODS[p.method].budgeted for p in evictions):
            return "the attention-error certificate bounds uniform evictions, not per-head or per-layer ones"
        if len(parts) > 1 and any(isinstance(p, Eviction) and p.certificate for p in parts):
            return "the attention-error certificate applies to an eviction arm alone, not in a composite"
        if any(isinstance(p, Eviction) and p.certificate and p.scope == "context" for p in parts):
            return (
                "the attention-error certificate bounds decoding steps only, and with scope 'context' "
                "the question and the first token are computed on the evicted cache, uncertified: "
                "use scope 'prompt'"
            )
        reuse = next((p for p in parts if isinstance(p, Reuse)), None)
        if reuse is None:
            return None
        if needs_queries(treatment):
            return (
                "query-aware eviction scores the prefill's queries, which reused KV never had: "
                "combine reuse only with streaming, knorm or random eviction"
            )
        if reuse.mode == "span":
            if not getattr(self.tokenizer, "is_fast", False):
                return "span reuse locates the context by token offsets, which needs a fast tokenizer"
            return rope_shift_refusal(self.model)
        return None

    def fingerprint(self) -> dict[str, Any]:
        import transformers

        return {
            "engine": self.name,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "device": str(self.device),
            "dtype": self.dtype,
            "attn_implementation": self.model.config._attn_implementation,
            "threads": torch.get_num_threads(),
            "machine": platform.machine(),
            **({"timeout_s": self.timeout_s} if self.timeout_s is not None else {}),
            # Left out for torch's and SDPA's, which every run made before each field meant: such a
            # run resumes with them (the engine table's resumed_as), never on the new defaults.
            **({"linear": self.linear} if self.linear != "torch" else {}),
            **({"attention": self.attention} if self.attention != "sdpa" else {}),
            **({"matvec": self.matvec} if self.matvec != "gemm" else {}),
        }

    def open(self, setup: ArmSetup) -> HFSession:
        return HFSession(self, setup)

    def close(self) -> None:
        return None


@dataclass
class HFSession:
    engine: HFEngine
    setup: ArmSetup
    reuser: Reuser | None = field(init=False, default=None)
    tier: Tier | None = field(init=False, default=None)
    block_size: int = field(init=False, default=16)
    directory: Path | None = field(init=False, default=None)
    replay: bool = field(init=False, default=False)
    """Keep every dropped entry and the exact error of every certified cell (coverage replay)."""
    replay_draws: int = field(init=False, default=1)
    """In replay: independent samples that each bound every cell (certificate.observer)."""
    last_certificate: DecodeCertificate | None = field(init=False, default=None)
    head_mask: HeadMask | None = field(init=False, default=None)
    """Per-head presence of a budgeted eviction's entries (installed on the attention modules)."""

    def __post_init__(self) -> None:
        engine, namespace = self.engine, self.setup.namespace
        for part in self.setup.treatment.parts():
            if isinstance(part, Eviction) and EVICTION_METHODS[part.method].budgeted:
                from kvgate.engines.hf.capture import attention_modules

                self.head_mask = HeadMask()
                self.head_mask.install(attention_modules(engine.model))
            if isinstance(part, Reuse) and part.mode == "prefix":
                self.reuser = PrefixReuse(engine.model, engine.prefix_cache, namespace, part.block_size)
            elif isinstance(part, Reuse):
                rotary = rotary_embedding(engine.model)
                store = engine.span_store
                self.reuser = SpanReuse(
                    engine.model, engine.tokenizer, rotary, store, namespace, part.block_size
                )
            elif isinstance(part, Offload):
                self.block_size = part.block_size
                if part.tier == "disk":
                    self.directory = Path(tempfile.mkdtemp(prefix="kvgate-offload-"))
                    self.tier = DiskTier(self.directory)
                else:
                    self.tier = HostTier()

    def generate(self, cases: Sequence[Case]) -> list[Generation]:
        """Each case's generation, in order. Cases of equal prompt length run as one batch of up to
        `batch_size` (`batching`) where the arm allows it, else one at a time in the order given (reuse
        depends on it); a batch that fails fails each of its cases."""
        out: list[Generation | None] = [None] * len(cases)
        size = self.setup.batch_size if self._batchable() else 1
        batches = (
            length_batches(cases, size, self._span_or_none) if size > 1 else [[i] for i in range(len(cases))]
        )
        for batch in batches:
            chosen = [cases[i] for i in batch]
            try:
                generations = self._batch(chosen)
            except (RuntimeError, ValueError, OSError) as exc:
                generations = [Generation.failed(c, f"{type(exc).__name__}: {exc}") for c in chosen]
            for i, generation in zip(batch, generations, strict=True):
                out[i] = generation
        return [g for g in out if g is not None]

    def _batchable(self) -> bool:
        """Whether cases may share a batch: not with reuse (each case reuses what it finds), a
        certificate (one per case) or a per-case time limit; eviction and quantisation are per row."""
        if self.reuser is not None or self.engine.timeout_s is not None:
            return False
        return not any(isinstance(p, Eviction) and p.certificate for p in self.setup.treatment.parts())

    def _span_or_none(self, case: Case) -> int:
        """The span compressed before the question (−1 when the case lacks what it needs: it then fails
        in its own group)."""
        try:
            return _compressed_span(self.setup.treatment, case, len(case.prompt_token_ids or ()))
        except ValueError:
            return -1

    def close(self) -> None:
        if self.head_mask is not None:
            self.head_mask.remove()
        self.engine.prefix_cache.drop_namespace(self.setup.namespace)
        self.engine.span_store.drop_namespace(self.setup.namespace)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    @torch.inference_mode()
    def _batch(self, cases: Sequence[Case]) -> list[Generation]:
        """Cases of one prompt length, span and max_new_tokens, generated together: ids [B, n] prefilled
        at once, then [B, 1] decode steps until every row has ended (a row that ended is still fed, its
        further tokens dropped). TTFT and latency are the batch's."""
        if any(case.prompt_token_ids is None for case in cases):
            raise ValueError("case has no prompt_token_ids: freeze the workload with --model")
        case = cases[0]
        model, treatment = self.engine.model, self.setup.treatment
        hooks = build_hooks(treatment)
        if self.head_mask is not None:
            self.head_mask.present.clear()
            for hook in hooks:
                if isinstance(hook, EvictHook):
                    hook.head_mask = self.head_mask
        certificate = self._certificate(case, hooks) if len(cases) == 1 else None
        ids = torch.tensor([c.prompt_token_ids for c in cases], device=self.engine.device)
        b, n = ids.shape
        span = _compressed_span(treatment, case, n)
        cache = self._cache(n + case.max_new_tokens)
        start = time.perf_counter()

        certified = certificate is not None
        logits, n_cached, queries = self._prefill(case, ids, cache, span, bool(hooks), certified)
        for hook in hooks:
            hook.after_prefill(cache, queries)
        if span < n:
            logits = forward_at(model, ids[:, span:], cache, span)
            _appended(hooks, cache, n - span)
        held = int(cache.layers[0].keys.shape[2])
        kept = held - round(self.head_mask.absent()) if self.head_mask is not None else held
        evidence = self._evidence(cache, hooks, n_cached, kept / held if held else 1.0)
        if self.tier is not None:
            corrupt = bool(self.setup.faults.get(CORRUPT_OFFLOAD_FAULT, False))
            written, read = round_trip(cache, self.tier, self.block_size, plant_corruption=corrupt)
            evidence |= {"n_tier_written": written, "n_tier_read": read}
        if logits is None:
            raise RuntimeError("prefill produced no logits")

        tokens: list[list[int]] = [[] for _ in cases]
        logprobs: list[list[float]] = [[] for _ in cases]
        running = [True] * b
        # Per row: decode steps it was still generating in, the entries it appends alone (a row that
        # ended is fed on with the others; those entries are not its own).
        fed = [0] * b
        quantizing = any(isinstance(h, QuantizeHook) for h in hooks)
        quantized = sum(h.quantized for h in hooks if isinstance(h, QuantizeHook))
        ttft = 0.0
        observing = certificate.observing(model, cache) if certificate else contextlib.nullcontext()
        with observing:
            for step in range(case.max_new_tokens):
                logp = torch.log_softmax(logits[:, -1].float(), dim=-1)
                chosen = torch.argmax(logp, dim=-1)
                picked = logp.gather(1, chosen.unsqueeze(1)).squeeze(1).tolist()
                if step == 0:
                    ttft = time.perf_counter() - start
                for row, token in enumerate(chosen.tolist()):
                    if running[row] and token in self.engine.eos_ids:
                        running[row] = False
                    elif running[row]:
                        tokens[row].append(token)
                        logprobs[row].append(picked[row])
                if not any(running) or step + 1 == case.max_new_tokens:
                    break
                limit = self.engine.timeout_s
                if limit is not None and time.perf_counter() - start > limit:
                    return [Generation.timeout(c, limit, time.perf_counter() - start) for c in cases]
                fed = [f + r for f, r in zip(fed, running, strict=True)]
                logits = forward_at(model, chosen.unsqueeze(1), cache, n + step)
                _appended(hooks, cache, 1)
        latency = time.perf_counter() - start
        summary = certificate.summary() if certificate else None
        self.last_certificate = certificate
        decode = self.engine.tokenizer.decode
        return [
            Generation(
                output_text=decode(row_tokens, skip_special_tokens=True),
                output_token_ids=tuple(row_tokens),
                n_prompt_tokens=n,
                n_cached_tokens=n_cached,
                n_kv_entries_kept=kept,
                ttft_s=ttft,
                latency_s=latency,
                mean_logprob=sum(row_logprobs) / len(row_logprobs) if row_logprobs else None,
                min_logprob=min(row_logprobs) if row_logprobs else None,
                certificate_bound_max=summary.bound_max if summary else None,
                certificate_bound_mean=summary.bound_mean if summary else None,
                certificate_estimate_mean=summary.estimate_mean if summary else None,
                certificate_relative_bound_mean=summary.relative_bound_mean if summary else None,
                certificate_relative_estimate_mean=summary.relative_estimate_mean if summary else None,
                certificate_cap_share=summary.cap_share if summary else None,
                **evidence,
                n_kv_quantized=quantized + row_fed if quantizing else 0,
            )
            for row_tokens, row_logprobs, row_fed in zip(tokens, logprobs, fed, strict=True)
        ]

    def _cache(self, capacity: int) -> Any:
        """A preallocated cache for `capacity` positions (`preallocated_cache`: no copy per step); a
        dynamic one where tensors taken from the cache must outlive later writes to it (the prefix
        cache and span store keep cached KV). A certificate copies what it keeps of the evicted entries
        (gathers, never views), so a certified arm decodes on the same preallocated cache as its plain
        arm."""
        from transformers import DynamicCache

        from kvgate.engines.hf.preallocated_cache import preallocated_cache

        if self.reuser is not None:
            return DynamicCache(config=self.engine.model.config)
        return preallocated_cache(self.engine.model.config, capacity)

    def _evidence(
        self, cache: Any, hooks: list[CacheHook], n_cached: int, present: float = 1.0
    ) -> dict[str, Any]:
        """The treatment's trace in the cache once the prompt is in it (analysis.proof): its KV bytes as
        its format stores them (kv_formats.formats.bytes_per_value: FP8 one byte per value, a block or
        per-token-head format its codes and scales; the tensors hold them dequantised), the element
        type ("K+V" when they differ), the spans a span reuse placed, and no tier traffic yet (the
        offload round trip counts its own). Per case: a batch's bytes are shared evenly by its rows,
        which hold the same number of entries. `present`: the share of held entries a budgeted eviction
        keeps (the rest are absent: head_mask), which the bytes count alone."""
        quantize = next((h for h in hooks if isinstance(h, QuantizeHook)), None)
        first = cache.layers[0].keys
        rows, size = int(first.shape[0]), first.element_size()
        dtypes = (quantize.dtype_of("keys"), quantize.dtype_of("values")) if quantize else (None, None)
        stored = 0.0
        for layer in cache.layers:
            for tensor, dtype in zip((layer.keys, layer.values), dtypes, strict=True):
                per_value = bytes_per_value(dtype, int(tensor.shape[-1]), size) if dtype else size
                stored += tensor.numel() * per_value
        names = sorted(set(dtypes), key=dtypes.index) if quantize else [self.engine.dtype]
        return {
            "kv_bytes": round(stored * present / rows),
            "kv_dtype": "+".join(str(n) for n in names),
            "n_tier_written": 0,
            "n_tier_read": 0,
            "n_spans_reused": int(isinstance(self.reuser, SpanReuse) and n_cached > 0),
        }

    def _certificate(self, case: Case, hooks: list[CacheHook]) -> DecodeCertificate | None:
        """The case's certificate, shown the eviction hook's drops; None unless the treatment asks for one.
        Its draws are seeded by the treatment's seed and the case id: reruns and resumes draw alike."""
        part = next((p for p in self.setup.treatment.parts() if isinstance(p, Eviction)), None)
        if part is None or not part.certificate:
            return None
        settings = CertificateSettings(
            share=part.certificate_share,
            floor=part.certificate_floor,
            confidence=part.certificate_confidence,
            window=part.window,
            seed=(part.seed, zlib.crc32(case.case_id.encode())),
        )
        certificate = DecodeCertificate(settings, replay=self.replay, draws=self.replay_draws)
        for hook in hooks:
            if isinstance(hook, EvictHook):
                hook.certificate = certificate
        return certificate

    def _prefill(
        self, case: Case, ids: torch.Tensor, cache: Any, until: int, hooked: bool, certified: bool = False
    ) -> tuple[torch.Tensor | None, int, dict[int, torch.Tensor] | None]:
        """Positions [0, until) into `cache`: (last logits, tokens reused, captured queries or None).
        Queries are captured for query-aware eviction and for a certificate (its inclusion probabilities)."""
        if self.reuser is not None:  # refusal() keeps query-aware eviction away from reuse
            logits, reused = self.reuser.prefill(case, ids, cache, until)
            return logits, reused, None
        capture: Any = contextlib.nullcontext(None)
        if hooked and (needs_queries(self.setup.treatment) or certified):
            from kvgate.engines.hf.capture import capture_queries

            window = _certificate_window(self.setup) if certified else None
            capture = capture_queries(self.engine.model, query_window(self.setup.treatment, window))
        with capture as queries:
            logits = forward_at(self.engine.model, ids[:, :until], cache, 0)
        return logits, 0, queries


def _compressed_span(treatment: Treatment, case: Case, n: int) -> int:
    """Tokens prefilled before the hooks run: the context alone for scope "context", else the prompt."""
    scoped = [p for p in treatment.parts() if isinstance(p, Eviction) and p.scope == "context"]
    if not scoped:
        return n
    if case.question_start is None or not 0 < case.question_start < n:
        raise ValueError("scope 'context' needs the case's question_start; freeze the workload with --model")
    return case.question_start


def _certificate_window(setup: ArmSetup) -> int:
    """The prompt queries a certificate's inclusion probabilities read: the eviction's `window`."""
    return next(p.window for p in setup.treatment.parts() if isinstance(p, Eviction))


def _appended(hooks: list[CacheHook], cache: Any, n_new: int) -> None:
    for hook in hooks:
        hook.after_append(cache, n_new)
