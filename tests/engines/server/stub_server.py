"""An OpenAI-compatible completions stub with planted faults, for tests and benchmarks only (loopback).

Standard library only, so it starts in a blink as a launched server (`python stub_server.py --port P
--answers A.json {arm_flags}`) or runs in a thread (`start_stub`). It answers each prompt (token ids)
with the answer the answers file holds for it (`answer_key`), one token per word, and emulates vLLM's
prefix cache per cache_salt when started with `--enable-prefix-caching` (whole blocks of
`--block-size`, the last prompt token always recomputed). Other `vllm serve` flags are ignored. It also
answers SGLang's native `/generate` and llama-server's `/completion` in their own shapes (started with
`--flavour sglang`, its radix cache is on unless `--disable-radix-cache`; `--flavour llama-server`
caches a prompt unless the request says `cache_prompt` false).
SGLang's HiCache (`--enable-hierarchical-cache`): every cached block is also written to host memory, the
device keeps the `--max-total-tokens` most recent tokens' blocks (0: all), and each answer splits its
cached tokens into `meta_info.cached_tokens_details` {device, host} (None when nothing was cached), as
SGLang's scheduler reports them. llama-server's slot (`--slot-save-path DIR`): `POST
/slots/0?action=save|erase|restore` write the last cached prompt to a file, drop the cache, load a file
back, answering `n_saved`/`n_written`, `n_erased`, `n_restored`/`n_read` (tools/server/README.md);
`slot_restore_noop` plants a restore that answers as if it loaded the file and loads nothing.
TensorRT-LLM's (`--extra_llm_api_options FILE`, its `kv_cache_config` read: `enable_block_reuse`,
`max_tokens` for the GPU pool, `host_cache_size` for the host tier, `event_buffer_max_size` for events):
a block leaving the GPU pool is copied to host memory and a reused one copied back, each an `updated`
event (cache_level 0→1, 1→0) that `POST /kv_cache_events` drains, as trtllm-serve serializes them;
`events_noop` plants a server that keeps no such event.

Faults (seeded, per prompt):
- fault_k, fault_share: when at least k requests are in flight, a planted share of them are answered
  with another in-flight request's output (a stand-in for KV read from a recycled block);
- flaky ("reset" | "503"): each prompt's first attempt drops the connection or answers 503;
- slow_share, slow_s: a share of prompts take slow_s seconds; malformed_share: a share of answers lack
  token_ids; die_after: the process exits (status 3) after that many answers (once, with die_marker:
  not again once the marker file exists); leak_salt: the prefix
  cache ignores cache_salt; preempt_at: a request arriving with at least this many in flight counts
  one preemption in /metrics;
- misbehave: "trickle-models" (/v1/models answers a byte a second), "trickle" (every completion
  likewise), "endless" (a completion's body never ends), "huge-ids" (token ids beyond int32),
  "deep" (a completion nested 100,000 arrays deep);
- stale_after_abort: a request whose client went away before its answer (an abort) leaves its slot
  stale, and the next request for the same prompt under the same salt is answered with the output of
  the request answered last (another request's KV read after a preemption or an abort);
- ignore_kv_cache_dtype: `--kv-cache-dtype` is accepted and ignored (the KV stays in `--dtype`), a
  planted no-op that the arm's proof of treatment must catch.

It names its version (`StubOptions.version`) where each stack does: `/version` (vLLM, TensorRT-LLM),
`/props` `build_info` (llama-server), `/get_server_info` `version` (SGLang).

/metrics also carries vLLM's `vllm:cache_config_info` labels: the cache dtype, the KV budget
(`--kv-cache-memory-bytes`, default 1 GiB) and the tokens and blocks it buys for a model shaped like
SmolLM2-135M (STUB_KV_ELEMENTS elements per token, each of the cache dtype's bytes).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import select
import socket
import threading
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FALLBACK = "I do not know."
STUB_KV_ELEMENTS = 2 * 30 * 3 * 64
"""Keys and values × layers × KV heads × head dimension: elements one cached token takes."""
ELEMENT_BYTES = {"float32": 4, "auto": 4, "bfloat16": 2, "float16": 2}


def answer_key(prompt: list[int]) -> str:
    return hashlib.sha1(",".join(map(str, prompt)).encode()).hexdigest()


def word_tokens(text: str) -> list[int]:
    return [zlib.crc32(w.encode()) & 0x7FFFFFFF for w in text.split()]


def _hit(seed: int, tag: str, key: str, share: float) -> bool:
    if share <= 0:
        return False
    digest = hashlib.sha256(f"{tag}:{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


@dataclass
class StubOptions:
    answers: dict[str, str] = field(default_factory=dict)
    prefix_caching: bool = False
    block_size: int = 16
    latency_s: float = 0.0
    seed: int = 0
    fault_k: int = 0
    fault_share: float = 0.0
    flaky: str | None = None
    slow_share: float = 0.0
    slow_s: float = 0.0
    malformed_share: float = 0.0
    die_after: int = 0
    die_marker: Path | None = None
    leak_salt: bool = False
    preempt_at: int = 0
    misbehave: str = ""
    token: str = ""
    """When set, every request must carry `Authorization: Bearer <token>` (else 401)."""
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    kv_cache_memory_bytes: int = 1 << 30
    num_gpu_blocks_override: int = 0
    ignore_kv_cache_dtype: bool = False
    stale_after_abort: bool = False
    hierarchical_cache: bool = False
    max_total_tokens: int = 0
    slot_save_path: Path | None = None
    slot_restore_noop: bool = False
    kv_events: bool = False
    events_noop: bool = False
    version: str | None = "stub-1"
    """The version it names for itself (None: it names none); launched, from $STUB_SERVER_VERSION."""

    def cache_config_dtype(self) -> str:
        """The KV dtype it stores: `--kv-cache-dtype`, unless the planted no-op ignores it."""
        return "auto" if self.ignore_kv_cache_dtype else self.kv_cache_dtype

    def cache_config_info(self) -> str:
        """The `vllm:cache_config_info` series this server's flags make."""
        dtype = self.cache_config_dtype()
        element = 1 if dtype.startswith("fp8") else ELEMENT_BYTES.get(self.dtype, 4)
        bought = self.kv_cache_memory_bytes // (STUB_KV_ELEMENTS * element * self.block_size)
        blocks = self.num_gpu_blocks_override or bought
        labels = {
            "block_size": self.block_size, "cache_dtype": dtype, "engine": 0,
            "kv_cache_memory_bytes": self.kv_cache_memory_bytes,
            "kv_cache_size_tokens": blocks * self.block_size, "num_gpu_blocks": blocks,
        }  # fmt: skip
        inner = ",".join(f'{key}="{value}"' for key, value in labels.items())
        return f"vllm:cache_config_info{{{inner}}} 1.0\n"


class StubState:
    def __init__(self, options: StubOptions) -> None:
        self.options = options
        self.lock = threading.Lock()
        self.in_flight: dict[int, str] = {}  # request number -> the answer it would give
        self.next_id = 0
        self.answered = 0
        self.preemptions = 0
        self.aborted: set[tuple[str, str]] = set()  # (salt, key) of requests whose client went away
        self.aborted_ids: list[str] = []  # the request_id of each request whose client went away
        self.answered_ids: list[str] = []  # the request_id of each answered request (as vLLM's API takes it)
        self.last_answer = FALLBACK
        self.attempts: dict[tuple[str, str, int], int] = {}
        self.cache: set[tuple[str, str]] = set()  # (salt, key of a block-aligned prefix)
        self.device: OrderedDict[tuple[str, str], None] = OrderedDict()  # HiCache: the device's blocks
        self.slot: list[int] = []  # llama-server: the prompt its slot holds
        self.events: list[dict[str, Any]] = []  # TensorRT-LLM: the KV cache events since the last drain
        self.on_death = lambda: os._exit(3)

    def cached(self, salt: str, prompt: list[int]) -> tuple[int, int]:
        """(prompt tokens served from the cache, of them those loaded from HiCache's host tier)."""
        o = self.options
        if not o.prefix_caching:
            return 0, 0
        scope = "" if o.leak_salt else salt
        hit = host = 0
        for end in range(o.block_size, len(prompt), o.block_size):  # the last token is never cached
            block = (scope, answer_key(prompt[:end]))
            if block not in self.cache:
                break
            if o.hierarchical_cache and block not in self.device:
                host += o.block_size
                self.moved(block, 1, 0)  # onboarded: copied back to the GPU to be reused
            hit = end
        return hit, host

    def store(self, salt: str, prompt: list[int]) -> None:
        o = self.options
        if o.prefix_caching:
            scope = "" if o.leak_salt else salt
            for end in range(o.block_size, len(prompt) + 1, o.block_size):
                block = (scope, answer_key(prompt[:end]))
                self.cache.add(block)  # with HiCache: written through to host memory
                self.device[block] = None
                self.device.move_to_end(block)
            while o.max_total_tokens and len(self.device) * o.block_size > o.max_total_tokens:
                evicted, _ = self.device.popitem(last=False)
                self.moved(evicted, 0, 1)  # offloaded to host memory

    def moved(self, block: tuple[str, str], old: int, new: int) -> None:
        """Record a block's move between cache levels as TensorRT-LLM's `updated` event."""
        if self.options.kv_events and not self.options.events_noop:
            diff = {"type": "event_diff", "old_value": old, "new_value": new}
            data = {"type": "updated", "block_hash": int(block[1][:12], 16), "cache_level": diff,
                    "priority": {"type": "event_diff", "old_value": 35, "new_value": 35}}  # fmt: skip
            self.events.append({"event_id": len(self.events), "data": data, "window_size": 4096})

    def slot_action(self, action: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """llama-server's `/slots/0?action=…` on the one slot (`--slot-save-path` must be set)."""
        o = self.options
        if o.slot_save_path is None:
            return 501, {"error": {"code": 501, "message": "This server does not support slots action."}}
        if action == "erase":
            erased, self.slot = len(self.slot), []
            self.cache.clear()
            self.device.clear()
            return 200, {"id_slot": 0, "n_erased": erased}
        path = o.slot_save_path / Path(str(body.get("filename", ""))).name
        if action == "save":
            path.write_text(json.dumps(self.slot))
            return 200, {"id_slot": 0, "filename": path.name, "n_saved": len(self.slot),
                         "n_written": path.stat().st_size, "timings": {"save_ms": 0.1}}  # fmt: skip
        if action == "restore" and path.is_file():
            tokens = [int(t) for t in json.loads(path.read_text())]
            if not o.slot_restore_noop:
                self.slot = tokens
                self.store("", tokens)
            return 200, {"id_slot": 0, "filename": path.name, "n_restored": len(tokens),
                         "n_read": path.stat().st_size, "timings": {"restore_ms": 0.1}}  # fmt: skip
        return 400, {"error": {"code": 400, "message": f"cannot {action} {path.name}"}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    state: StubState

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _refused(self) -> bool:
        token = self.state.options.token
        if token and self.headers.get("Authorization") != f"Bearer {token}":
            if self.command == "POST":
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._send(401, b"unauthorized")
            return True
        return False

    def do_GET(self) -> None:
        if self._refused():
            return
        if self.path == "/health":
            self._send(200, b"")
        elif self.path == "/v1/models":
            if self.state.options.misbehave == "trickle-models":
                self._trickle(json.dumps({"object": "list", "data": [{"id": "stub"}]}).encode())
                return
            self._json(200, {"object": "list", "data": [{"id": "stub", "object": "model"}]})
        elif self.path == "/get_server_info":  # SGLang's resolved server arguments
            info = {"kv_cache_dtype": self.state.options.cache_config_dtype()}
            self._json(200, {**info, **self._version("version")})
        elif self.path == "/version":  # vLLM's and trtllm-serve's
            self._json(200, self._version("version"))
        elif self.path == "/props":  # llama-server's global properties
            self._json(200, {"total_slots": 1, "model_alias": "stub", **self._version("build_info")})
        elif self.path == "/metrics":
            text = (
                "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.\n"
                "# TYPE vllm:num_preemptions_total counter\n"
                f'vllm:num_preemptions_total{{engine="0",model_name="stub"}} {self.state.preemptions}.0\n'
                "# TYPE vllm:cache_config_info gauge\n" + self.state.options.cache_config_info()
            )
            self._send(200, text.encode(), "text/plain")
        else:
            self._send(404, b"not found")

    def do_POST(self) -> None:
        if self._refused():
            return
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.startswith("/reset_prefix_cache"):  # the cache stays: it stands for the offload tier
            print("reset_prefix_cache", flush=True)
            self._json(200, {"success": True})
            return
        if self.path == "/kv_cache_events":
            with self.state.lock:
                drained, self.state.events = self.state.events, []
            self._json(200, drained)
            return
        if self.path.startswith("/slots/0?action="):
            with self.state.lock:
                status, answer = self.state.slot_action(self.path.split("=", 1)[1], body)
            self._json(status, answer)
            return
        if self.path not in FLAVOUR_PATHS:
            self._send(404, b"not found")
            return
        shape = FLAVOUR_PATHS[self.path]
        body = _as_vllm_request(shape, body)
        state, o = self.state, self.state.options
        prompt = [int(t) for t in body["prompt"]]
        salt = str(body.get("cache_salt") or "")
        request_id = str(body.get("request_id") or "")
        key = answer_key(prompt)
        max_tokens = int(body.get("max_tokens") or 16)
        with state.lock:
            tries_key = (salt, key, max_tokens)
            attempt = state.attempts[tries_key] = state.attempts.get(tries_key, 0) + 1
        if o.flaky and attempt == 1:
            if o.flaky == "503":
                self._send(503, b"busy")
            else:
                self.close_connection = True
                self.connection.shutdown(2)
            return
        own = state.options.answers.get(key, FALLBACK)
        with state.lock:
            number = state.next_id
            state.next_id += 1
            state.in_flight[number] = own
            crowd = len(state.in_flight)
            if o.preempt_at and crowd >= o.preempt_at:
                state.preemptions += 1
            cached, host = state.cached(salt, prompt) if body.get("cache_prompt", True) else (0, 0)
        delay = o.latency_s + (o.slow_s if _hit(o.seed, "slow", key, o.slow_share) else 0.0)
        if delay:
            time.sleep(delay)
        gone = self._client_gone()
        with state.lock:
            if gone:  # aborted: nothing to answer, the slot left as the fault says
                del state.in_flight[number]
                state.aborted.add((salt, key))
                state.aborted_ids.append(request_id)
                return
            answer = own
            if o.stale_after_abort and (salt, key) in state.aborted:
                state.aborted.discard((salt, key))
                answer = state.last_answer if state.last_answer != own else FALLBACK
            if (
                o.fault_k
                and max(crowd, len(state.in_flight)) >= o.fault_k
                and _hit(o.seed, "swap", key, o.fault_share)
            ):
                others = [a for n, a in sorted(state.in_flight.items()) if n != number and a != own]
                answer = others[0] if others else answer
            del state.in_flight[number]
            state.answered_ids.append(request_id)
            state.last_answer = own
            if body.get("cache_prompt", True):
                state.store(salt, prompt)
                state.slot = prompt
            state.answered += 1
            dying = o.die_after and state.answered > o.die_after
            if dying and o.die_marker is not None:  # dies once: not again after a restart
                dying = not o.die_marker.exists()
                o.die_marker.touch()
        if dying:
            state.on_death()
            return
        if self._misbehaved(o.misbehave):
            return
        words = answer.split()[:max_tokens]
        tokens = word_tokens(" ".join(words))
        if o.misbehave == "huge-ids":
            tokens = [t + (1 << 31) for t in tokens]
        choice: dict[str, Any] = {"index": 0, "text": " ".join(words), "finish_reason": "stop"}
        if not _hit(o.seed, "malformed", key, o.malformed_share):
            choice["token_ids"] = tokens
        if body.get("logprobs") is not None:
            choice["logprobs"] = {"token_logprobs": [-0.25] * len(tokens), "tokens": words}
        if shape != "vllm":
            details = {"device": cached - host, "host": host} if o.hierarchical_cache and cached else None
            wanted = body.get("logprobs") is not None
            self._json(200, _flavour_answer(shape, prompt, words, tokens, cached, wanted, details))
            return
        usage = {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(tokens),
            "total_tokens": len(prompt) + len(tokens),
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        self._json(200, {"id": f"cmpl-{request_id or number}", "object": "text_completion", "model": "stub",
                         "choices": [choice], "usage": usage})  # fmt: skip

    def _version(self, key: str) -> dict[str, str]:
        version = self.state.options.version
        return {} if version is None else {key: version}

    def _misbehaved(self, how: str) -> bool:
        """Answer as the `misbehave` fault says (True), or leave the answer to the caller (False)."""
        if how == "trickle":
            self._trickle(b'{"choices": []}')
        elif how == "deep":
            self._send(200, b"[" * 100_000 + b"]" * 100_000, "application/json")
        elif how == "endless":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"[" + b" " * (1 << 16) + b"\r\n"
            with contextlib.suppress(OSError):  # until the client hangs up
                while True:
                    self.wfile.write(b"%x\r\n" % (len(chunk) - 2) + chunk)
        else:
            return False
        return True

    def _trickle(self, data: bytes) -> None:
        """`data` as a 200 answer, one byte a second (each byte well within any read timeout)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(OSError):
            for byte in data:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(1.0)

    def _client_gone(self) -> bool:
        """Whether the client closed the connection while its request was being served."""
        try:
            ready, _, _ = select.select([self.connection], [], [], 0)
            return bool(ready) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _send(self, status: int, data: bytes, kind: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


FLAVOUR_PATHS = {"/v1/completions": "vllm", "/generate": "sglang", "/completion": "llama-server"}
"""Where each stack's requests arrive; /v1/completions answers in vLLM's (and TensorRT-LLM's) shape."""


def _as_vllm_request(shape: str, body: dict[str, Any]) -> dict[str, Any]:
    """A flavour's request (SGLang's /generate, llama-server's /completion) read as the vLLM one the
    stub serves; `cache_prompt` False (llama-server) keeps the prompt out of the prefix cache."""
    if shape == "sglang":
        params = body.get("sampling_params") or {}
        wanted = 1 if body.get("return_logprob") else None
        return {"prompt": body["input_ids"], "cache_salt": body.get("cache_salt"),
                "max_tokens": params.get("max_new_tokens"), "logprobs": wanted}  # fmt: skip
    if shape == "llama-server":
        return {"prompt": body["prompt"], "max_tokens": body.get("n_predict"),
                "cache_prompt": bool(body.get("cache_prompt", True)),
                "logprobs": 1 if body.get("n_probs") else None}  # fmt: skip
    return body


def _flavour_answer(
    shape: str,
    prompt: list[int],
    words: list[str],
    tokens: list[int],
    cached: int,
    logprobs: bool,
    details: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The answer in the stack's own shape: SGLang's native /generate (output_ids, meta_info) or
    llama-server's /completion (tokens, tokens_evaluated, timings.cache_n, stop_type; tokens_cached the
    tokens its slot holds, as the real server answered)."""
    text = " ".join(words)
    if shape == "sglang":
        meta: dict[str, Any] = {"id": "stub", "finish_reason": {"type": "stop", "matched": None},
                                "prompt_tokens": len(prompt), "completion_tokens": len(tokens),
                                "cached_tokens": cached, "cached_tokens_details": details}  # fmt: skip
        if logprobs:
            meta["output_token_logprobs"] = [[-0.25, t, None] for t in tokens]
        return {"text": text, "output_ids": tokens, "meta_info": meta}
    answer: dict[str, Any] = {"content": text, "tokens": tokens, "stop": True, "stop_type": "eos",
                              "tokens_evaluated": len(prompt), "tokens_cached": len(prompt) + len(tokens),
                              "timings": {"cache_n": cached, "prompt_n": len(prompt) - cached}}  # fmt: skip
    if logprobs:
        answer["completion_probabilities"] = [{"id": t, "logprob": -0.25, "top_logprobs": []} for t in tokens]
    return answer


class _Listener(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


class StubServer:
    """A stub serving in a thread of this process: `url`, `state`, `stop()`."""

    def __init__(self, options: StubOptions, port: int = 0) -> None:
        handler = type("BoundHandler", (Handler,), {})
        self.state = handler.state = StubState(options)
        self.httpd = _Listener(("127.0.0.1", port), handler)
        self.state.on_death = self._die
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def _die(self) -> None:
        threading.Thread(target=self.stop, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def launch_template(answers_file: Path, *options: str) -> str:
    """The server command template that launches this stub with `options` (and the arm's flags)."""
    script, extra = Path(__file__).resolve(), " ".join(options)
    return f"{{python}} {script} --port {{port}} --answers {answers_file} {extra} {{arm_flags}}"


def start_stub(answers: dict[str, str], **options: Any) -> StubServer:
    return StubServer(StubOptions(answers=answers, **options))


def _kv_cache_config(path: Path | None) -> dict[str, str]:
    """The `kv_cache_config` keys of a TensorRT-LLM options file (flat `  key: value` lines)."""
    if path is None:
        return {}
    pairs = [line.strip().split(":", 1) for line in path.read_text().splitlines() if line.startswith("  ")]
    return {key.strip(): value.strip() for key, value in pairs}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--answers", type=Path, required=True)
    parser.add_argument("--enable-prefix-caching", dest="prefix_caching", action="store_true")
    parser.add_argument("--no-enable-prefix-caching", dest="prefix_caching", action="store_false")
    parser.add_argument("--block-size", type=int, default=16)
    for name, kind in (("latency-s", float), ("seed", int), ("fault-k", int), ("fault-share", float),
                       ("slow-share", float), ("slow-s", float), ("malformed-share", float),
                       ("die-after", int), ("preempt-at", int)):  # fmt: skip
        parser.add_argument(f"--{name}", type=kind, default=kind(0))
    parser.add_argument("--flaky", choices=("reset", "503"), default=None)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--kv-cache-dtype", default="auto")
    parser.add_argument("--kv-cache-memory-bytes", type=int, default=1 << 30)
    parser.add_argument("--num-gpu-blocks-override", type=int, default=0)
    parser.add_argument("--ignore-kv-cache-dtype", action="store_true")
    parser.add_argument("--stale-after-abort", action="store_true")
    parser.add_argument("--leak-salt", action="store_true")
    parser.add_argument("--die-marker", type=Path, default=None)
    parser.add_argument("--flavour", choices=("vllm", "sglang", "llama-server"), default="vllm")
    parser.add_argument("--disable-radix-cache", action="store_true")
    parser.add_argument("--enable-hierarchical-cache", action="store_true")
    parser.add_argument("--max-total-tokens", type=int, default=0)
    parser.add_argument("--slot-save-path", type=Path, default=None)
    parser.add_argument("--slot-restore-noop", action="store_true")
    parser.add_argument("--extra_llm_api_options", type=Path, default=None)
    parser.add_argument("--events-noop", action="store_true")
    args, _ = parser.parse_known_args()  # every other vllm serve flag is ignored
    if args.flavour == "sglang":  # SGLang's radix cache is on unless disabled
        args.prefix_caching = not args.disable_radix_cache
    elif args.flavour == "llama-server":  # per request: cache_prompt
        args.prefix_caching = True
    trtllm = _kv_cache_config(args.extra_llm_api_options)
    if trtllm:  # TensorRT-LLM's kv_cache_config, as trtllm-serve reads it
        args.prefix_caching = trtllm.get("enable_block_reuse") == "true"
        args.max_total_tokens = int(trtllm.get("max_tokens", 0))
        args.enable_hierarchical_cache = int(trtllm.get("host_cache_size", 0)) > 0
    options = StubOptions(
        answers=json.loads(args.answers.read_text()), prefix_caching=args.prefix_caching,
        block_size=args.block_size, latency_s=args.latency_s, seed=args.seed, fault_k=args.fault_k,
        fault_share=args.fault_share, flaky=args.flaky, slow_share=args.slow_share, slow_s=args.slow_s,
        malformed_share=args.malformed_share, die_after=args.die_after, die_marker=args.die_marker,
        leak_salt=args.leak_salt,
        preempt_at=args.preempt_at, dtype=args.dtype, kv_cache_dtype=args.kv_cache_dtype,
        kv_cache_memory_bytes=args.kv_cache_memory_bytes,
        num_gpu_blocks_override=args.num_gpu_blocks_override,
        ignore_kv_cache_dtype=args.ignore_kv_cache_dtype, stale_after_abort=args.stale_after_abort,
        hierarchical_cache=args.enable_hierarchical_cache, max_total_tokens=args.max_total_tokens,
        slot_save_path=args.slot_save_path, slot_restore_noop=args.slot_restore_noop,
        kv_events=int(trtllm.get("event_buffer_max_size", 0)) > 0, events_noop=args.events_noop,
        version=os.environ.get("STUB_SERVER_VERSION", "stub-1") or None,
    )  # fmt: skip
    server = StubServer(options, args.port)
    server.state.on_death = lambda: os._exit(3)  # a launched stub dies as a process does
    server.thread.join()


if __name__ == "__main__":
    main()
