"""The engine seam: one batch-generation method per arm session, plus capabilities.

An engine is created once per run. `open(setup)` gives a fresh session for one arm and replicate, with
its own cache namespace; the session generates greedily for a batch of cases and exposes its cache
counters so the runner can verify isolation rather than assume it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from kvgate.treatments.spec import Treatment
from kvgate.workload.case import Case


@dataclass(frozen=True)
class Generation:
    """One case's output and measurements. `error` set means the engine failed on this case.

    certificate_*: an eviction arm's attention-error certificate over decoding steps, layers and heads
    (the largest and the mean upper bound, the mean estimate; the mean bound and estimate relative to the
    retained output's norm, the share of cells whose bound is the cap); None without a certificate.
    `timed_out`: the case ran past the engine's per-case time limit (`error` says so); stored as
    fail_kind "timeout", a failure of the arm, not an engine error.

    The treatment's evidence, as the engine counted it (None: the engine does not count it; the proof
    of treatment, `report/proof.py`, then says what is missing):
    `kv_bytes`: bytes of KV the case's cache held after the treatment, in the format it was stored in;
    `kv_dtype`: the element type the engine stored the case's KV in (e.g. "bfloat16", "fp8_e4m3");
    `n_kv_quantized`: cache positions stored quantised (prompt and generated tokens);
    `n_tier_written`, `n_tier_read`: KV blocks written to the offload tier and read back from it;
    `n_spans_reused`: context spans found in the span store and placed into the cache.
    """

    output_text: str
    output_token_ids: tuple[int, ...]
    n_prompt_tokens: int
    n_cached_tokens: int
    n_kv_entries_kept: int
    ttft_s: float
    latency_s: float
    mean_logprob: float | None
    min_logprob: float | None
    error: str | None = None
    certificate_bound_max: float | None = None
    certificate_bound_mean: float | None = None
    certificate_estimate_mean: float | None = None
    timed_out: bool = False
    certificate_relative_bound_mean: float | None = None
    certificate_relative_estimate_mean: float | None = None
    certificate_cap_share: float | None = None
    kv_bytes: int | None = None
    kv_dtype: str | None = None
    n_kv_quantized: int | None = None
    n_tier_written: int | None = None
    n_tier_read: int | None = None
    n_spans_reused: int | None = None

    @staticmethod
    def failed(case: Case, error: str) -> Generation:
        n = case.n_prompt_tokens or 0
        return Generation("", (), n, 0, 0, 0.0, 0.0, None, None, error)

    @staticmethod
    def timeout(case: Case, seconds: float, latency_s: float) -> Generation:
        """`case` ran past the per-case limit of `seconds` (after `latency_s`); its output is dropped."""
        n = case.n_prompt_tokens or 0
        message = f"no answer within the per-case limit of {seconds:g} s"
        return Generation("", (), n, 0, 0, latency_s, latency_s, None, None, message, timed_out=True)


@dataclass(frozen=True)
class ArmSetup:
    """What a session needs: the arm, its replicate, its treatment, its namespace and planted faults.

    `batch_size` is how many cases the runner hands to one `generate` call (a batch for hf, concurrent
    requests for vllm); `seed` is the same for every arm of a run, so any sampling matches the control's.
    `concurrency`: at most this many requests in flight at once (engines that serve requests);
    `kv_blocks`: the KV pool the arm's engine gets, in blocks (None: the engine's own size), to put it
    under pressure. The stress schedules (`engines/schedule.py`; engines whose `EngineInfo.schedules`):
    `abort_percent`, that share of measured requests is first cancelled mid-generation and sent again;
    `interleave`, each batch's prompts are also sent under another namespace between the arm's own
    requests; `resend_percent`, that share of cases is sent again after other prompts evicted their
    blocks; `repeat`, each batch is generated this often with cache churn between. `run_dir`: where
    the run is stored (an engine may keep its logs and pass records there).
    """

    arm: str
    replicate: int
    treatment: Treatment
    namespace: str
    faults: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 1
    seed: int = 0
    concurrency: int = 1
    kv_blocks: int | None = None
    abort_percent: int = 0
    run_dir: Path | None = None
    interleave: bool = False
    resend_percent: int = 0
    repeat: int = 1


class ArmSession(Protocol):
    def generate(self, cases: Sequence[Case]) -> list[Generation]: ...

    def close(self) -> None: ...


@runtime_checkable
class NamesItsStack(Protocol):
    """A session whose server names its serving stack's version (the server engine's: {stack, version,
    source}, `engines/server/stack_version.py`); the runner holds every session of a run to one."""

    stack_version: dict[str, Any] | None


class Engine(Protocol):
    name: str

    def refusal(self, treatment: Treatment) -> str | None:
        """Why this engine cannot apply `treatment` here, or None when it can."""
        ...

    def fingerprint(self) -> dict[str, Any]:
        """Engine name, library versions, device and settings that change outputs."""
        ...

    def open(self, setup: ArmSetup) -> ArmSession: ...

    def close(self) -> None: ...
