"""One arm session on a serving engine with a prefix cache: the protocol the in-process `vllm` engine and
the `server` engine share, written once.

Every request carries the session's namespace as its `cache_salt` (prefixed "kvgate-ns:", so it can
never equal a LoRA name). A batch runs as:

1. cases that cannot run (no frozen `prompt_token_ids`, or whatever the engine adds) fail alone;
2. a reuse arm's prompts are first prefilled once under its salt (one token generated and discarded);
   an arm that also offloads then has its device prefix cache reset (the offload tier keeps its copies),
   so every measured hit is a block loaded back from host memory;
3. the measured requests run, greedy (`answer`);
4. each case's cached-token counter is checked against the arm (`vllm/counters.py`): a non-reuse arm
   must read 0, a reuse arm more than 0 for a prompt longer than a block; once per reuse session the
   first case that hit is sent again under a fresh salt, which must read 0 (isolation proven from the
   engine's own counters). A contradiction raises EngineFailure naming the arm.

Steps 2–4 are `measure`; a session that runs stress schedules (`engines/schedule.py`) overrides
`run_batch` to drive them, `measure` among their operations. Subclasses supply the engine's side:
`warm_up`, `answer`, `probe_cached_tokens`, `try_reset`.
"""

from __future__ import annotations

import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from kvgate.engines.base import ArmSetup, Generation
from kvgate.engines.kv_cache_facts import NO_FACTS, KVCacheFacts
from kvgate.engines.vllm.counters import counter_contradiction, salt_leak
from kvgate.errors import EngineFailure
from kvgate.workload.case import Case

SALT_PREFIX = "kvgate-ns:"
RESET_ATTEMPTS = 100
"""Tries (50 ms apart) at resetting the device prefix cache: it refuses while requests are in flight."""
NO_TOKENS = "case has no prompt_token_ids: freeze the workload with --model"


def cache_salt(namespace: str) -> str:
    """The request's cache_salt for a namespace: the namespace itself, prefixed if it is not already."""
    return namespace if namespace.startswith(SALT_PREFIX) else SALT_PREFIX + namespace


class ServedSession(ABC):
    """One arm and replicate on a served engine: its salt, the reuse warm-up, the counter checks."""

    reset_refused = "the engine kept refusing to reset its device prefix cache"
    """What `reset_device_prefix_cache` says after RESET_ATTEMPTS refusals (after "arm 'NAME': ")."""

    def __init__(self, setup: ArmSetup, eos_ids: set[int]) -> None:
        self.setup = setup
        self.salt = cache_salt(setup.namespace)
        kinds = {p.kind for p in setup.treatment.parts()}
        self.reuses, self.offloads = "reuse" in kinds, "offload" in kinds
        self.probed = False
        self.eos_ids = eos_ids
        self.block_size: int | None = None
        """The engine's KV block size in tokens (None where it cannot tell)."""
        self.cache: KVCacheFacts = NO_FACTS

    # --- the engine's side -------------------------------------------------------------------------

    @abstractmethod
    def warm_up(self, cases: Sequence[Case]) -> None:
        """Prefill each case's prompt once under the session's salt, one token generated and discarded."""

    @abstractmethod
    def answer(self, cases: Sequence[Case]) -> list[Generation]:
        """The measured, greedy generations of `cases` (each has prompt_token_ids), in their order."""

    @abstractmethod
    def probe_cached_tokens(self, case: Case, namespace: str) -> int:
        """Prefill `case` once under `namespace`'s salt; how many prompt tokens it read from the cache."""

    @abstractmethod
    def try_reset(self) -> bool:
        """Ask the engine to drop its device prefix cache, not the offload tier; whether it did."""

    def unrunnable(self, case: Case) -> str | None:
        """Why `case` cannot run on this session, or None."""
        return NO_TOKENS if case.prompt_token_ids is None else None

    def resets_device_cache(self) -> bool:
        """Whether kvgate may reset this engine's device prefix cache (it owns the engine)."""
        return True

    def counter_block(self) -> int:
        """The block size the reuse lower bound uses (none, sys.maxsize, where it is unknown)."""
        return self.block_size or sys.maxsize

    # --- the protocol ------------------------------------------------------------------------------

    def generate(self, cases: Sequence[Case]) -> list[Generation]:
        results: dict[int, Generation] = {}
        runnable = []
        for index, case in enumerate(cases):
            problem = self.unrunnable(case)
            if problem:
                results[index] = Generation.failed(case, problem)
            else:
                runnable.append(index)
        todo = [cases[i] for i in runnable]
        if todo:
            results.update(zip(runnable, self.run_batch(todo), strict=True))
        return [results[i] for i in range(len(cases))]

    def run_batch(self, cases: Sequence[Case]) -> list[Generation]:
        """The generations of runnable `cases`: one measured pass."""
        return self.measure(cases, warm=True)

    def measure(self, cases: Sequence[Case], warm: bool) -> list[Generation]:
        """The measured answers of `cases`, their counters checked; `warm`: a reuse arm's prompts are
        prefilled first under its salt (without: a re-send after churn, which reads only what the churn
        left, so no lower bound on its hits is checked)."""
        if warm and self.reuses:
            self.warm_up(cases)
            if self.offloads and self.resets_device_cache():
                self.reset_device_prefix_cache()
        generations = self.answer(cases)
        self.check_counters(cases, generations, warm)
        return generations

    def check_counters(self, cases: Sequence[Case], generations: Sequence[Generation], warm: bool) -> None:
        """The batch's cached-token counters against the arm, and the once-per-session isolation probe."""
        block = self.counter_block() if warm else sys.maxsize
        problem = counter_contradiction(self.setup.arm, self.reuses, block, cases, generations)
        if problem is None and self.reuses and not self.probed:
            hit = next((c for c, g in zip(cases, generations, strict=True) if g.n_cached_tokens > 0), None)
            if hit is not None:
                self.probed = True
                fresh = f"{self.setup.namespace}:isolation-probe"
                problem = salt_leak(self.setup.arm, self.probe_cached_tokens(hit, fresh))
        if problem:
            raise EngineFailure(problem)

    def reset_device_prefix_cache(self) -> None:
        """Drop the device prefix cache but not the offload tier, so the measured pass loads from the host."""
        for _ in range(RESET_ATTEMPTS):
            if self.try_reset():
                return
            time.sleep(0.05)
        raise EngineFailure(f"arm {self.setup.arm!r}: {self.reset_refused}")

    def tier_blocks_read(self, cached_tokens: int) -> int | None:
        """KV blocks a measured request read back from the offload tier: once the device prefix cache is
        reset after the warm-up, every cached token was loaded from the tier (blocks of the engine's block
        size; one when that is unknown). None for arms that do not offload behind reuse."""
        if not (self.offloads and self.reuses and self.resets_device_cache()):
            return None
        return -(-cached_tokens // self.block_size) if self.block_size else int(cached_tokens > 0)

    def greedy_generation(
        self,
        tokens: Sequence[int],
        logprobs: Sequence[float],
        finish_reason: str | None,
        decode: Callable[[list[int]], str],
        *,
        n_prompt: int,
        n_cached: int,
        ttft_s: float,
        latency_s: float,
        tier_blocks: tuple[int | None, int | None] | None = None,
    ) -> Generation:
        """A measured output as a row: ending before the end-of-sequence token (as the hf engine stops),
        its logprobs summarised, the cache's evidence and the tier's reads attached (`tier_blocks`:
        (written, read) as the engine counted them; else the reads `tier_blocks_read` infers)."""
        kept, scores = list(tokens), list(logprobs)
        if finish_reason == "stop" and kept and kept[-1] in self.eos_ids:
            kept.pop()
            scores = scores[: len(kept)]
        return Generation(
            output_text=decode(kept),
            output_token_ids=tuple(kept),
            n_prompt_tokens=n_prompt,
            n_cached_tokens=n_cached,
            n_kv_entries_kept=n_prompt,
            ttft_s=ttft_s,
            latency_s=latency_s,
            mean_logprob=sum(scores) / len(scores) if scores else None,
            min_logprob=min(scores) if scores else None,
            n_tier_written=None if tier_blocks is None else tier_blocks[0],
            n_tier_read=self.tier_blocks_read(n_cached) if tier_blocks is None else tier_blocks[1],
            **self.cache.evidence(n_prompt),
        )
