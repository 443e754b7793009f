"""Every HTTP exchange with a server, bounded in time and bytes: one deadline covers connecting, the
headers and the whole body (a server answering a byte at a time cannot stretch it), and a body over
`max_bytes` is refused as it arrives (an endless answer cannot grow without limit). Bodies are asked
for uncompressed; a server that compresses anyway is decoded a received chunk at a time, so what one
chunk can expand to is bounded too.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx

from kvgate.engines.server.endpoints import TOKEN_ENV
from kvgate.engines.server.tls import tls_context

MAX_RESPONSE_BYTES = 1 << 26
"""Largest answer kvgate reads (64 MiB; a 65,536-token completion with logprobs is a few MiB)."""


def headers() -> dict[str, str]:
    """What every request carries: no compression, and $KVGATE_ENDPOINT_TOKEN as a bearer token when
    set (read here, at the moment of sending: it is never stored or printed)."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    return {"Accept-Encoding": "identity", **({"Authorization": f"Bearer {token}"} if token else {})}


class ResponseTooLarge(httpx.TransportError):
    """The server's answer ran past the byte cap."""


async def exchange(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    deadline_s: float,
    json: Any = None,
    max_bytes: int = MAX_RESPONSE_BYTES,
) -> tuple[int, bytes]:
    """(status, body) of one request within `deadline_s` in all; TimeoutError past it, ResponseTooLarge
    past `max_bytes`, an httpx error when the transport fails."""
    async with asyncio.timeout(deadline_s):
        async with client.stream(method, url, json=json, headers=headers()) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > max_bytes:
                raise ResponseTooLarge(f"{url} answered {declared} bytes, over the cap of {max_bytes}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise ResponseTooLarge(f"{url} answered more than the cap of {max_bytes} bytes")
            return response.status_code, bytes(body)


def request(
    method: str, url: str, deadline_s: float, json: Any = None, max_bytes: int = MAX_RESPONSE_BYTES
) -> tuple[int, bytes]:
    """`exchange` from synchronous code, on a loop and client of its own."""

    async def once() -> tuple[int, bytes]:
        async with httpx.AsyncClient(timeout=None, verify=tls_context()) as client:
            return await exchange(client, method, url, deadline_s, json, max_bytes)

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(once())
    finally:
        loop.close()
