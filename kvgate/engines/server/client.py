"""Completions requests over one async HTTP client: bounded in flight, timed, retried when transient.

Each case gets at most `timeout_s` in all (its attempts together, each from connecting to the last
byte of the answer: `bounded_http`); running past it is a timeout of that case, not an error of the
pass. A transport failure (connection refused or reset, a dropped connection) or an answer 502/503 is
retried up to `retries` times, `backoff_s` doubling between attempts; when a launched server has died
meanwhile, or the retries run out, the whole pass fails (EngineFailure: the stack is gone, and the rows
stored so far stay). Any other error status, an answer over the byte cap, and an answer that cannot be
read, is an engine error of that case alone. Results come back in the order the cases were given,
whatever order they complete in.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from kvgate.engines.server.bounded_http import ResponseTooLarge, exchange
from kvgate.engines.server.response import Completion, MalformedResponse, parse_completion
from kvgate.engines.server.tls import tls_context
from kvgate.errors import EngineFailure

TRANSIENT_STATUS = frozenset({502, 503})
CONNECT_S = 10.0
MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class Request:
    case_id: str
    body: dict[str, Any]
    n_prompt: int
    path: str = "/v1/completions"
    """Where the request is posted (a flavour's own endpoint: SGLang's /generate, llama-server's
    /completion)."""


@dataclass(frozen=True)
class Outcome:
    """One request's end: a completion, or an error (a timeout among them), after `attempts` tries."""

    completion: Completion | None
    error: str | None
    timed_out: bool
    attempts: int
    latency_s: float


class CompletionClient:
    """Posts to `<url>/v1/completions`; `died()` says why the server is gone (None while it runs)."""

    def __init__(
        self,
        url: str,
        timeout_s: float,
        retries: int,
        backoff_s: float,
        concurrency: int,
        died: Callable[[], str | None] = lambda: None,
        parse: Callable[[Any, int], Completion] = parse_completion,
    ) -> None:
        self.url, self.timeout_s, self.retries, self.backoff_s = url, timeout_s, retries, backoff_s
        self.concurrency, self.died, self.parse = concurrency, died, parse
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        timeout = httpx.Timeout(None, connect=CONNECT_S)
        self.http = httpx.AsyncClient(timeout=timeout, limits=limits, verify=tls_context())

    async def aclose(self) -> None:
        await self.http.aclose()

    async def complete_all(self, requests: Sequence[Request]) -> list[Outcome]:
        """Every request, at most `concurrency` in flight; outcomes in the order of `requests`."""
        gate = asyncio.Semaphore(self.concurrency)

        async def bounded(request: Request) -> Outcome:
            async with gate:
                return await self.complete(request)

        try:
            async with asyncio.TaskGroup() as group:  # a failed pass cancels the requests still in flight
                tasks = [group.create_task(bounded(r)) for r in requests]
        except ExceptionGroup as failed:
            raise _first(failed) from None
        return [task.result() for task in tasks]

    async def complete(self, request: Request) -> Outcome:
        start = time.perf_counter()
        deadline = start + self.timeout_s
        last = ""
        for attempt in range(1, self.retries + 2):
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                break
            try:
                url = f"{self.url}{request.path}"
                status, body = await exchange(self.http, "POST", url, remaining, json=request.body)
                if status not in TRANSIENT_STATUS:
                    return _outcome(request, status, body, attempt, time.perf_counter() - start, self.parse)
                last = f"HTTP {status}"
            except TimeoutError:
                break
            except (httpx.ReadTimeout, httpx.WriteTimeout):
                break
            except ResponseTooLarge as exc:  # that answer, not the server: an error of this case
                return Outcome(None, str(exc), False, attempt, time.perf_counter() - start)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            gone = self.died()
            if gone:
                raise EngineFailure(f"case {request.case_id}: {gone}")
            if attempt <= self.retries:
                await asyncio.sleep(
                    min(self.backoff_s * 2 ** (attempt - 1), max(0.0, deadline - time.perf_counter()))
                )
        else:
            raise EngineFailure(
                f"case {request.case_id}: {self.url} failed {self.retries + 1} attempts, the last with {last}"
            )
        latency = time.perf_counter() - start
        error = f"no answer within the per-case limit of {self.timeout_s:g} s"
        return Outcome(None, error, True, attempt, latency)


def _first(group: BaseExceptionGroup[Any]) -> BaseException:
    """The first failure a group of requests raised (nested groups opened)."""
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


def _outcome(
    request: Request,
    status: int,
    body: bytes,
    attempts: int,
    latency: float,
    parse: Callable[[Any, int], Completion] = parse_completion,
) -> Outcome:
    if status != 200:
        message = body.decode("utf-8", "replace").strip().replace("\n", " ")[:MAX_ERROR_CHARS]
        return Outcome(None, f"server answered {status}: {message}", False, attempts, latency)
    try:
        completion = parse(json.loads(body), request.n_prompt)
    except RecursionError:
        error = f"malformed response for case {request.case_id}: JSON nested too deeply"
        return Outcome(None, error, False, attempts, latency)
    except (MalformedResponse, ValueError) as exc:
        error = f"malformed response for case {request.case_id}: {exc}"
        return Outcome(None, error, False, attempts, latency)
    return Outcome(completion, None, False, attempts, latency)
