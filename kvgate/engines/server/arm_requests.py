"""An arm session's requests to its server, the stress schedules' among them (`session.ServerSession`
holds one per pass).

A request carries the case's frozen prompt token ids, greedy sampling and the case's max tokens (one
token when it is not measured). vLLM's completions API gets the namespace's `cache_salt`, asks for the
output token ids back and, when measured, for logprobs, under `request_id` `<namespace>:<case id>` (the
same when resubmitted); another stack gets its flavour's own body (`flavours/`). Requests go out at
most `concurrency` at a time (`client.py`) on the session's event loop; the measured ones are counted,
with the attempts of those retried, for the pass record.

The stress schedules (`engines/schedule.py`): an aborted request is sent and cancelled ABORT_AFTER_S
after it left (the server aborts a request whose client went away), then sent again as measured; the
interleaved namespace B and the churn are requests of one token under salts of their own (churn sends
the batch's prompts reversed: other prompts of the same lengths).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from kvgate.engines.base import ArmSetup
from kvgate.engines.schedule import churn_namespace, other_namespace
from kvgate.engines.served_session import cache_salt
from kvgate.engines.server.client import CompletionClient, Outcome, Request
from kvgate.engines.server.response import parse_completion
from kvgate.engines.server.session_options import ServerOptions
from kvgate.errors import EngineFailure
from kvgate.workload.case import Case

ABORT_AFTER_S = 0.25
"""How long an aborted request runs before its client goes away: past its arrival and prefill on a busy
machine (a shorter wait can cancel a request before the server saw it)."""


class ArmRequests:
    """The requests of one arm's pass to the server at `url` serving `model_id`, under the arm's `salt`;
    `died` names how a launched server died (None while it runs)."""

    def __init__(
        self, setup: ArmSetup, engine: ServerOptions, url: str, model_id: str, salt: str, reuses: bool,
        died: Callable[[], str | None],
    ) -> None:  # fmt: skip
        self.setup, self.flavour, self.model_id = setup, engine.flavour, model_id
        self.salt, self.reuses = salt, reuses
        self.sent = 0
        """Measured and warm-up requests sent (the stress schedules' own are not counted)."""
        self.retried: dict[str, int] = {}
        """Case id → the most attempts one of its requests took, for those retried."""
        self.loop = asyncio.new_event_loop()
        self.client: CompletionClient | None = None
        parse = engine.flavour.parse if engine.flavour is not None else parse_completion

        async def connect() -> CompletionClient:
            return CompletionClient(
                url, engine.timeout_s, engine.retries, engine.backoff_s, setup.concurrency, died, parse
            )

        try:
            self.client = self.loop.run_until_complete(connect())
        except BaseException:
            self.close()
            raise

    def build(self, case: Case, salt: str, measured: bool, reverse: bool = False) -> Request:
        """`case`'s request under `salt` (`reverse`: its prompt reversed, as churn sends it)."""
        prompt = list(case.prompt_token_ids or ())
        if reverse:
            prompt.reverse()
        if self.flavour is not None:
            tokens = case.max_new_tokens if measured else 1
            path, asked = self.flavour.request(self.model_id, prompt, tokens, salt, measured, self.reuses)
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

    def send(self, requests: list[Request], count: bool = True) -> list[Outcome]:
        """Each request's outcome (`count`: counted in `sent` and `retried`); a failure of the transport
        as a whole stops the pass, naming how to resume it."""
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
            self.sent += len(requests)
            for request, outcome in zip(requests, outcomes, strict=True):
                if outcome.attempts > 1:
                    self.retried[request.case_id] = max(
                        self.retried.get(request.case_id, 0), outcome.attempts
                    )
        return outcomes

    def send_cases(self, cases: Sequence[Case], measured: bool) -> list[Outcome]:
        """The cases' requests under the arm's salt, counted."""
        return self.send([self.build(c, self.salt, measured) for c in cases])

    def abort(self, cases: Sequence[Case]) -> int:
        """Send each case's measured request and cancel it ABORT_AFTER_S later, unless it was answered by
        then; how many were cancelled."""
        client = self.client
        assert client is not None
        requests = [self.build(c, self.salt, measured=True) for c in cases]

        async def cancel(request: Request) -> int:
            try:
                await asyncio.wait_for(client.complete(request), ABORT_AFTER_S)
            except TimeoutError:
                return 1
            return 0

        async def every() -> list[int]:
            return list(await asyncio.gather(*(cancel(r) for r in requests)))

        return sum(self.loop.run_until_complete(every()))

    def interleave(self, cases: Sequence[Case]) -> None:
        salt = cache_salt(other_namespace(self.setup.namespace))
        self.send([self.build(c, salt, measured=False) for c in cases], count=False)

    def churn(self, cases: Sequence[Case]) -> int:
        salt = cache_salt(churn_namespace(self.setup.namespace))
        requests = [self.build(c, salt, measured=False, reverse=True) for c in cases]
        self.send(requests, count=False)
        return len(requests)

    def close(self) -> None:
        """Cancel what is still in flight, close the client and the event loop (once)."""
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
