"""A `server` engine's arm session: one arm and replicate on its server (launched or given).

Launched form: the session fills the command template with the arm's flags (`flags.py`: the same engine
arguments as the in-process `vllm` engine, and `--num-gpu-blocks-override` for a matrix's `kv_blocks`;
a flavour's own flags and config file otherwise), starts the server on a free loopback port with its log
in the run directory, and stops it at close.

Every session runs the served protocol the in-process engine shares (`engines/served_session.py`): a
reuse arm's prompts warmed up under its salt before the measured requests (an arm that also offloads then
has a launched server's device prefix cache reset, so its hits come from the offload tier), each batch's
cached-token counters checked against the arm, and once per reuse session a probe under a fresh salt,
which must read 0 cached tokens.
The stress schedules (`engines/schedule.py`) run as requests (`arm_requests.py`: aborted and re-sent
under the same `request_id`, interleaved under namespace B, churned); their counts go in the pass record.
Each row carries the KV dtype and bytes per token the server's `vllm:cache_config_info` names
(`kv_cache_facts.py`) and, for an offload arm after the reset, the blocks read back from the tier.
Time to first token is not measured (the requests are not streamed): `ttft_s` is the request's latency.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from kvgate.contained import check_contained
from kvgate.engines.base import ArmSetup, Generation
from kvgate.engines.kv_cache_facts import NO_FACTS, KVCacheFacts, cache_facts, metrics_cache_config
from kvgate.engines.schedule import ScheduleCounts, pass_attempt, run_schedule, schedule_load
from kvgate.engines.served_session import ServedSession, cache_salt
from kvgate.engines.server import bounded_http
from kvgate.engines.server.arm_requests import ArmRequests
from kvgate.engines.server.client import Outcome
from kvgate.engines.server.endpoints import TOKEN_ENV, endpoint_for
from kvgate.engines.server.flags import server_flags
from kvgate.engines.server.flavours.base import CONFIG_PLACEHOLDER, SLOTS_PLACEHOLDER, Flavour, ReadsItsLog
from kvgate.engines.server.launch import (
    HOST,
    LaunchedServer,
    fill_template,
    free_port,
    read_log,
    served_model_id,
    vllm_executable,
)
from kvgate.engines.server.metrics import preemptions
from kvgate.engines.server.record import FOLDER, next_session, pass_stem, write_record
from kvgate.engines.server.response import Completion
from kvgate.engines.server.session_options import ServerOptions
from kvgate.engines.server.slot_offload import SlotTier
from kvgate.engines.server.stack_version import VLLM
from kvgate.engines.server.tier_events import drain
from kvgate.engines.vllm import args as vllm_args
from kvgate.errors import EngineFailure
from kvgate.treatments.spec import Offload
from kvgate.workload.case import Case

SERVER_ENVIRONMENT = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
DEV_MODE = "VLLM_SERVER_DEV_MODE"
MODELS_DEADLINE_S = 30.0
"""The most asking a given endpoint for its model may take, in all (or `timeout_s` when shorter)."""


class ServerSession(ServedSession):
    """One arm and replicate: its server (launched or given), its salt, its requests (arm_requests.py;
    the protocol: engines/served_session)."""

    reset_refused = "the server kept refusing to reset its prefix cache"

    def __init__(self, engine: ServerOptions, setup: ArmSetup) -> None:
        super().__init__(setup, engine.eos_ids)
        self.engine = engine
        self.block_size = engine.block_size
        self.timeouts = 0
        self.counts = ScheduleCounts()
        self.started = time.monotonic()
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        if setup.run_dir is not None:
            self.run_dir = setup.run_dir
        else:
            self._scratch = tempfile.TemporaryDirectory(prefix="kvgate-server-")
            self.run_dir = Path(self._scratch.name)
        self.session = next_session(self.run_dir, setup.arm, setup.replicate, pass_attempt(setup))
        self.stem = pass_stem(setup.arm, setup.replicate, pass_attempt(setup), self.session)
        self.server: LaunchedServer | None = None
        self.command: list[str] | None = None
        self._requests: ArmRequests | None = None
        if engine.flavour is not None and not engine.flavour.salted:
            self.probed = True  # no salt to probe: the arm's own server is its namespace
        offload = next((p for p in setup.treatment.parts() if isinstance(p, Offload)), None)
        self.tier_block = offload.block_size if offload is not None else 1
        self.slots: SlotTier | None = None
        """The launched server's slot as the offload tier (a flavour that saves slots, offload arms)."""
        self.events: Flavour | None = None
        """The launched flavour whose KV cache events count an offload arm's blocks (tier_events.py)."""
        self.stack_version: dict[str, Any] | None = None
        """The version the server names for itself (`stack_version.py`): the runner holds a run to one."""
        try:
            self.url, self.model_id = self._start()
            self.stack_version = self._stack_version()
            launched = self.offloads and self.server is not None and engine.flavour is not None
            if launched and engine.flavour is not None and engine.flavour.saves_slots:
                self.slots = SlotTier(self.url, setup.arm, self.tier_block)
            if launched and engine.flavour is not None and engine.flavour.events_path is not None:
                self.events = engine.flavour
            started = self._metrics()
            self.preemptions_before = None if started is None else preemptions(started)
            config = None if started is None else metrics_cache_config(started)
            dtype = engine.base_args.get("dtype")
            self.cache = NO_FACTS if config is None else cache_facts(config, dtype)
            self.cached_before: int | None = None
            if engine.flavour is not None:
                self.cache = self._flavour_cache(engine.flavour)
                if isinstance(engine.flavour, ReadsItsLog) and started is not None:
                    self.cached_before = engine.flavour.cached_total(started)
            died = self.server.died if self.server is not None else (lambda: None)
            self._requests = ArmRequests(setup, engine, self.url, self.model_id, self.salt, self.reuses, died)
        except BaseException:
            self.close()
            raise

    @property
    def requests(self) -> ArmRequests:
        assert self._requests is not None  # made before the session is returned
        return self._requests

    def run_batch(self, cases: Sequence[Case]) -> list[Generation]:
        return run_schedule(self.setup, cases, self, self.counts)

    # --- the served protocol's engine side (engines/served_session.py) ------------------------------

    def warm_up(self, cases: Sequence[Case]) -> None:
        if self.slots is None:
            self.requests.send_cases(cases, measured=False)
            return
        for case in cases:  # one slot: each prompt prefilled, then saved to its own file
            self.requests.send_cases([case], measured=False)
            self.slots.save(case.case_id)

    def answer(self, cases: Sequence[Case]) -> list[Generation]:
        if self.events is not None:
            return self._answer_between_drains(cases, self.events)
        if self.slots is None:
            outcomes = self.requests.send_cases(cases, measured=True)
            return [self._generation(c, o) for c, o in zip(cases, outcomes, strict=True)]
        generations = []
        for case in cases:  # each case's slot file restored, then its measured request served from it
            restored = self.slots.restore(case.case_id)
            (outcome,) = self.requests.send_cases([case], measured=True)
            done = outcome.completion
            problem = done and self.slots.unserved(
                case.case_id, restored, done.prompt_tokens, done.cached_tokens
            )
            if problem:
                raise EngineFailure(problem)
            generations.append(self._generation(case, outcome, self.slots.blocks(case.case_id, restored)))
        return generations

    def resets_device_cache(self) -> bool:
        """A launched vLLM server's prefix cache, or a launched flavour's slot (erased); a given
        endpoint's cache is not kvgate's to reset, and SGLang's HiCache keeps no device-only reset (its
        answers say which hits came from host memory instead)."""
        return self.server is not None and (self.engine.flavour is None or self.slots is not None)

    def check_counters(self, cases: Sequence[Case], generations: Sequence[Generation], warm: bool) -> None:
        """The answers' counters (the protocol's check), then, for a flavour that counts its cache hits
        on /metrics (llama-server), the server's own total: a non-reuse arm's must not have risen."""
        super().check_counters(cases, generations, warm)
        flavour = self.engine.flavour
        if self.reuses or self.cached_before is None or not isinstance(flavour, ReadsItsLog):
            return
        text = self._metrics()
        total = None if text is None else flavour.cached_total(text)
        if total is not None and total > self.cached_before:
            raise EngineFailure(
                f"arm {self.setup.arm!r} may not reuse KV, yet the server's /metrics counts "
                f"{total - self.cached_before} prompt tokens served from its cache since it started"
            )

    def counter_block(self) -> int:
        # No lower bound on reuse hits when the block size is unknown, or when a small pool (kv_blocks)
        # may have evicted a warmed-up prompt before it was measured; the run-level check still wants some.
        return sys.maxsize if self.setup.kv_blocks is not None else super().counter_block()

    def try_reset(self) -> bool:
        if self.slots is not None:
            return self.slots.erase()
        try:
            status, body = bounded_http.request("POST", f"{self.url}/reset_prefix_cache", 30.0)
        except (httpx.HTTPError, TimeoutError) as exc:
            reason = str(exc) or "no answer within 30 s"
            raise EngineFailure(f"arm {self.setup.arm!r}: /reset_prefix_cache failed: {reason}") from None
        if status == 404:
            raise EngineFailure(
                f"arm {self.setup.arm!r}: the server has no /reset_prefix_cache (vLLM serves it with "
                f"{DEV_MODE}=1), so offloaded blocks cannot be told from the device cache"
            )
        return status == 200 and _succeeded(body)

    # --- the stress schedules' other operations (engines/schedule.py; arm_requests.py sends them) --

    def abort(self, cases: Sequence[Case]) -> int:
        return self.requests.abort(cases)

    def interleave(self, cases: Sequence[Case]) -> None:
        self.requests.interleave(cases)

    def churn(self, cases: Sequence[Case]) -> int:
        return self.requests.churn(cases)

    def probe_cached_tokens(self, case: Case, namespace: str) -> int:
        """Prefill `case` once under `namespace`'s salt; how many prompt tokens it read from the cache."""
        requests = self.requests
        (outcome,) = requests.send([requests.build(case, cache_salt(namespace), measured=False)], count=False)
        if outcome.completion is None:
            raise EngineFailure(
                f"arm {self.setup.arm!r}: the isolation probe on case {case.case_id} failed: {outcome.error}"
            )
        return outcome.completion.cached_tokens

    def close(self) -> None:
        try:
            if self._requests is not None:
                self._write_record()
        finally:
            if self._requests is not None:  # closed once: the record is written once
                self._requests.close()
                self._requests = None
            if self.server is not None:
                self.server.stop(self.engine.stop_s)
                self.server = None
            if self._scratch is not None:
                self._scratch.cleanup()
                self._scratch = None

    # --- internals ---------------------------------------------------------------------------------

    def _start(self) -> tuple[str, str]:
        engine, setup = self.engine, self.setup
        label = f"server for arm {setup.arm!r}"
        if engine.form == "endpoint":
            url = endpoint_for(engine.endpoints, setup.arm)
            assert url is not None  # refused before otherwise
            return url, _endpoint_model(url, label, min(MODELS_DEADLINE_S, engine.timeout_s))
        if engine.flavour is not None:
            return self._start_flavour(label)
        args = vllm_args.arm_args(engine.base_args, setup.treatment, engine.offload_gib, setup.kv_blocks)
        port = free_port()
        values = {
            "model": str(engine.model_path or ""),
            "host": HOST,
            "port": str(port),
            "vllm": vllm_executable(),
            "python": sys.executable,
        }
        self.command = fill_template(engine.template, values, server_flags(args))
        log = self.run_dir / FOLDER / f"{self.stem}.log"
        check_contained(self.run_dir, log)
        environment = {**os.environ, **SERVER_ENVIRONMENT}
        if self.offloads:  # /reset_prefix_cache is served in vLLM's development mode only
            environment[DEV_MODE] = "1"
        self.server = LaunchedServer(self.command, log, environment, label)
        url = f"http://{HOST}:{port}"
        return url, self.server.start(url, engine.ready_s)

    def _start_flavour(self, label: str) -> tuple[str, str]:
        """Launch the flavour's server: its command and the arm's flags (a config file, where the flavour
        is configured by one, written beside the log)."""
        engine, flavour = self.engine, self.engine.flavour
        assert flavour is not None
        launch = flavour.launch(self.setup.treatment, self.setup.kv_blocks)
        flags = list(launch.flags)
        if launch.config is not None:
            config = self.run_dir / FOLDER / f"{self.stem}.yaml"
            check_contained(self.run_dir, config)
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(launch.config, encoding="utf-8")
            flags = [str(config) if f == CONFIG_PLACEHOLDER else f for f in flags]
        if SLOTS_PLACEHOLDER in flags:
            slots = self.run_dir / FOLDER / f"{self.stem}-slots"
            check_contained(self.run_dir, slots)
            slots.mkdir(parents=True, exist_ok=True)
            flags = [str(slots) if f == SLOTS_PLACEHOLDER else f for f in flags]
        port = free_port()
        model = str(engine.model_path or "")
        if engine.template:
            values = {"model": model, "host": HOST, "port": str(port), "vllm": "", "python": sys.executable}
            self.command = fill_template(engine.template, values, flags)
        else:
            self.command = [*flavour.command(model, HOST, port, sys.executable), *flags]
        log = self.run_dir / FOLDER / f"{self.stem}.log"
        check_contained(self.run_dir, log)
        self.server = LaunchedServer(self.command, log, {**os.environ, **SERVER_ENVIRONMENT}, label)
        url = f"http://{HOST}:{port}"
        return url, self.server.start(url, engine.ready_s)

    def _generation(
        self, case: Case, outcome: Outcome, slot_blocks: tuple[int, int] | None = None
    ) -> Generation:
        if outcome.timed_out:
            self.timeouts += 1
            return Generation.timeout(case, self.engine.timeout_s, outcome.latency_s)
        completion = outcome.completion
        if completion is None:
            return Generation.failed(case, outcome.error or "no answer")
        tokens = list(completion.token_ids)
        vocab = self.engine.vocab_size
        if vocab is not None and tokens and max(tokens) >= vocab:
            return Generation.failed(
                case, f"the server answered token id {max(tokens)}, beyond the vocabulary of {vocab}"
            )
        return self.greedy_generation(
            tokens,
            completion.logprobs,
            completion.finish_reason,
            lambda _: completion.text,
            n_prompt=completion.prompt_tokens,
            n_cached=completion.cached_tokens,
            ttft_s=outcome.latency_s,
            latency_s=outcome.latency_s,
            tier_blocks=slot_blocks or self._answered_tier(completion),
        )

    def _answer_between_drains(self, cases: Sequence[Case], flavour: Flavour) -> list[Generation]:
        """Each measured request alone, between two drains of the server's KV cache events."""
        assert flavour.events_path is not None
        drain(self.url, self.setup.arm, flavour.events_path, flavour.tier_events)  # the warm-up's moves
        generations = []
        for case in cases:
            (outcome,) = self.requests.send_cases([case], measured=True)
            moved = drain(self.url, self.setup.arm, flavour.events_path, flavour.tier_events)
            generations.append(self._generation(case, outcome, moved))
        return generations

    def _answered_tier(self, completion: Completion) -> tuple[None, int | None] | None:
        """An offload arm's blocks read back, where the stack's answer says which cached tokens came from
        its tier (SGLang's HiCache: host tokens, in whole blocks); None to leave it to the protocol."""
        if not self.offloads or self.engine.flavour is None:
            return None
        tier = completion.tier_tokens
        return None, None if tier is None else -(-tier // self.tier_block)

    def _flavour_cache(self, flavour: Flavour) -> KVCacheFacts:
        """The KV cache the flavour's server names: in the log of one launched here (llama-server), else
        in its info answer (the dtype only)."""
        if isinstance(flavour, ReadsItsLog):
            if self.server is None:
                return NO_FACTS
            return flavour.kv_cache_in_log(read_log(self.server.log_path)) or NO_FACTS
        return KVCacheFacts(self._flavour_kv_dtype(flavour), None)

    def _flavour_kv_dtype(self, flavour: Flavour) -> str | None:
        """The KV dtype the flavour's server names for itself (its info answer), or None."""
        if flavour.info_path is None:
            return None
        try:
            status, body = bounded_http.request("GET", f"{self.url}{flavour.info_path}", 10.0)
            return flavour.kv_dtype(json.loads(body)) if status == 200 else None
        except (httpx.HTTPError, TimeoutError, ValueError):
            return None

    def _stack_version(self) -> dict[str, Any]:
        """What the server answers where its stack names its version (no answer: version None)."""
        flavour = self.engine.flavour
        answer = VLLM if flavour is None else flavour.version_answer
        try:
            status, body = bounded_http.request("GET", f"{self.url}{answer.path}", 10.0, max_bytes=1 << 22)
        except (httpx.HTTPError, TimeoutError):
            return answer.recorded(None, b"")
        return answer.recorded(status, body)

    def _metrics(self) -> str | None:
        """The server's Prometheus text, or None without `/metrics`."""
        try:
            status, body = bounded_http.request("GET", f"{self.url}/metrics", 10.0)
        except (httpx.HTTPError, TimeoutError):
            return None
        return body.decode("utf-8", "replace") if status == 200 else None

    def _preemptions(self) -> int | None:
        text = self._metrics()
        return None if text is None else preemptions(text)

    def _write_record(self) -> None:
        if self.setup.run_dir is None:
            return
        before, after = self.preemptions_before, self._preemptions()
        record: dict[str, Any] = {
            "schema": "kvgate.server-pass/1",
            "arm": self.setup.arm,
            "replicate": self.setup.replicate,
            "attempt": pass_attempt(self.setup),
            "session": self.session,
            "form": self.engine.form,
            "url": self.url,
            "concurrency": self.setup.concurrency,
            "kv_blocks": self.setup.kv_blocks,
            "requests": self.requests.sent,
            "retried": dict(sorted(self.requests.retried.items())),
            "timeouts": self.timeouts,
            "preemptions": None if before is None or after is None else max(0, after - before),
            "load": schedule_load(self.setup),
            **self.counts.as_record(),
            "wall_s": round(time.monotonic() - self.started, 3),
        }
        flavour = self.engine.flavour
        if isinstance(flavour, ReadsItsLog) and self.cached_before is not None:
            text = self._metrics()
            total = None if text is None else flavour.cached_total(text)
            record["cached_tokens_total"] = None if total is None else total - self.cached_before
        if self.stack_version is not None:
            record["stack_version"] = self.stack_version
        if self.command is not None:
            record["command"] = self.command
            record["log"] = f"{FOLDER}/{self.stem}.log"
        write_record(self.setup.run_dir, record)


def _succeeded(body: bytes) -> bool:
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(answer, dict) and bool(answer.get("success"))


def _endpoint_model(url: str, label: str, deadline_s: float) -> str:
    """The model a given endpoint serves, asked within `deadline_s` in all."""
    try:
        status, body = bounded_http.request("GET", f"{url}/v1/models", deadline_s)
        if status != 200:
            hint = f" (set ${TOKEN_ENV} to the server's token)" if status in (401, 403) else ""
            raise EngineFailure(f"{label}: {url}/v1/models answered HTTP {status}{hint}")
        model = served_model_id(json.loads(body))
    except TimeoutError:
        raise EngineFailure(f"{label}: {url}/v1/models gave no answer within {deadline_s:g} s") from None
    except (httpx.HTTPError, ValueError, RecursionError) as exc:
        raise EngineFailure(f"{label}: {url}/v1/models does not answer: {exc}") from None
    if model is None:
        raise EngineFailure(f"{label}: {url}/v1/models names no model")
    return model
