"""Given endpoints: `--endpoint ARM=URL` (repeatable; `*=URL` serves every arm not named)."""

from __future__ import annotations

from collections.abc import Iterable

from kvgate.errors import BadInput
from kvgate.names import check_name

ANY_ARM = "*"


def normalise_url(url: str, where: str) -> str:
    """`url` without a trailing slash or `/v1` (kvgate adds the paths), checked to be http(s)."""
    if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1]) == 0:
        raise BadInput(f"{where}: {url!r} is not an http:// or https:// URL")
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def parse_endpoints(items: Iterable[str]) -> dict[str, str]:
    """`ARM=URL` items as {arm: url}; an arm given twice, or a malformed item, is refused."""
    endpoints: dict[str, str] = {}
    for item in items:
        arm, sep, url = item.partition("=")
        where = f"--endpoint {item!r}"
        if not sep or not arm or not url:
            raise BadInput(f"{where}: expected ARM=URL (ARM a matrix arm, or * for every arm)")
        if arm != ANY_ARM:
            check_name("arm", arm, where)
        if arm in endpoints:
            raise BadInput(f"{where}: arm {arm!r} is given twice")
        endpoints[arm] = normalise_url(url, where)
    return endpoints


def endpoint_for(endpoints: dict[str, str], arm: str) -> str | None:
    return endpoints.get(arm, endpoints.get(ANY_ARM))


def with_endpoints(
    engine: str | None, options: dict[str, object] | None, items: Iterable[str]
) -> tuple[str | None, dict[str, object] | None]:
    """`kvgate run --endpoint ...`: the server engine (unless another is named: refused) with the
    endpoints among its options; unchanged when no endpoint is given."""
    items = list(items)
    if not items:
        return engine, options
    if engine not in (None, "server"):
        raise BadInput(f"--endpoint gates a deployed server: it needs --engine server, not {engine!r}")
    return "server", {**(options or {}), "endpoints": parse_endpoints(items)}
