"""The `hf` engine: transformers as the reference that can apply every treatment.

Greedy decoding in an explicit loop so the cache can be changed between steps. The model is loaded once
per run and only read; each arm session starts with empty caches of its own (its namespace). Decoding
after eviction continues at the original next position: `position_ids` carry true positions while the
attention mask follows the shorter cache.
"""

from __future__ import annotations

import contextlib
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kvgate.engines.base import ArmSetup, Generation
from kvgate.engines.hf.cache_hooks import CacheHook, build_hooks, needs_queries
from kvgate.models import ModelSpec, model_folder
from kvgate.treatments.spec import Eviction, Treatment
from kvgate.workload.case import Case

SUPPORTED_KINDS = ("full", "eviction", "quantize", "composite")


class HFEngine:
    name = "hf"

    def __init__(self, model: ModelSpec, device: str = "cpu", dtype: str = "float32") -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = model_folder(model)
        self.model_spec = model
        self.device = torch.device(device)
        self.dtype = dtype
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=getattr(torch, dtype))
        self.model.to(self.device).eval()
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) | {self.tokenizer.eos_token_id}

    def refusal(self, treatment: Treatment) -> str | None:
        for part in treatment.parts():
            if part.kind not in SUPPORTED_KINDS:
                return f"the hf engine does not apply {part.kind} treatments yet"
        return None

    def fingerprint(self) -> dict[str, Any]:
        import transformers

        return {
            "engine": "hf",
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "device": str(self.device),
            "dtype": self.dtype,
            "attn_implementation": self.model.config._attn_implementation,
            "threads": torch.get_num_threads(),
            "machine": platform.machine(),
        }

    def open(self, setup: ArmSetup) -> HFSession:
        return HFSession(self, setup)

    def close(self) -> None:
        return None


@dataclass
class HFSession:
    engine: HFEngine
    setup: ArmSetup

    def generate(self, cases: Sequence[Case]) -> list[Generation]:
        out = []
        for case in cases:
            try:
                out.append(self._one(case))
            except (RuntimeError, ValueError) as exc:
                out.append(Generation.failed(case, f"{type(exc).__name__}: {exc}"))
        return out

    def close(self) -> None:
        return None

    @torch.inference_mode()
    def _one(self, case: Case) -> Generation:
        from transformers import DynamicCache

        if case.prompt_token_ids is None:
            raise ValueError("case has no prompt_token_ids: freeze the workload with --model")
        model, treatment = self.engine.model, self.setup.treatment
        hooks = build_hooks(treatment)
        ids = torch.tensor([case.prompt_token_ids], device=self.engine.device)
        n = ids.shape[1]
        span = _compressed_span(treatment, case, n)
        cache = DynamicCache(config=model.config)
        start = time.perf_counter()

        capture: Any = contextlib.nullcontext(None)
        if hooks and needs_queries(treatment):
            from kvgate.engines.hf.capture import capture_queries

            capture = capture_queries(model)
        with capture as queries:
            logits = _forward(model, ids[:, :span], cache, 0)
        for hook in hooks:
            hook.after_prefill(cache, queries)
        if span < n:
            logits = _forward(model, ids[:, span:], cache, span)
            _appended(hooks, cache, n - span)
        kept = int(cache.layers[0].keys.shape[2])

        tokens: list[int] = []
        logprobs: list[float] = []
        ttft = 0.0
        for step in range(case.max_new_tokens):
            logp = torch.log_softmax(logits[0, -1].float(), dim=-1)
            token = int(torch.argmax(logp))
            if step == 0:
                ttft = time.perf_counter() - start
            if token in self.engine.eos_ids:
                break
            tokens.append(token)
            logprobs.append(float(logp[token]))
            if step + 1 == case.max_new_tokens:
                break
            logits = _forward(model, torch.tensor([[token]], device=ids.device), cache, n + step)
            _appended(hooks, cache, 1)
        latency = time.perf_counter() - start
        text = self.engine.tokenizer.decode(tokens, skip_special_tokens=True)
        return Generation(
            output_text=text,
            output_token_ids=tuple(tokens),
            n_prompt_tokens=n,
            n_cached_tokens=0,
            n_kv_entries_kept=kept,
            ttft_s=ttft,
            latency_s=latency,
            mean_logprob=sum(logprobs) / len(logprobs) if logprobs else None,
            min_logprob=min(logprobs) if logprobs else None,
        )


def _compressed_span(treatment: Treatment, case: Case, n: int) -> int:
    """Tokens prefilled before the hooks run: the context alone for scope "context", else the prompt."""
    scoped = [p for p in treatment.parts() if isinstance(p, Eviction) and p.scope == "context"]
    if not scoped:
        return n
    if case.question_start is None or not 0 < case.question_start < n:
        raise ValueError("scope 'context' needs the case's question_start; freeze the workload with --model")
    return case.question_start


def _forward(model: Any, ids: torch.Tensor, cache: Any, first_position: int) -> torch.Tensor:
    """Run `ids` at true positions first_position… against `cache`; returns the last logits [1, 1, vocab]."""
    positions = torch.arange(first_position, first_position + ids.shape[1], device=ids.device).unsqueeze(0)
    out = model(input_ids=ids, past_key_values=cache, position_ids=positions, use_cache=True, logits_to_keep=1)
    logits: torch.Tensor = out.logits
    if not torch.isfinite(logits[0, -1]).all():
        raise RuntimeError("non-finite logits")
    return logits


def _appended(hooks: list[CacheHook], cache: Any, n_new: int) -> None:
    for hook in hooks:
        hook.after_append(cache, n_new)


