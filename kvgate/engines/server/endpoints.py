"""Given endpoints: `--endpoint ARM=URL` (repeatable; `*=URL` serves every arm not named)."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from kvgate.errors import BadInput
from kvgate.names import check_name

ANY_ARM = "*"
TOKEN_ENV = "KVGATE_ENDPOINT_TOKEN"
"""A bearer token for given endpoints: sent as `Authorization: Bearer …`, never stored or printed."""


def check_url(url: str, where: str) -> None:
    """Refuse a URL that can never serve (another scheme, no host, a bad port, spaces) and one holding
    a secret (user:password@, a query such as ?token=…): kvgate stores endpoint URLs in the run and
    prints them, so a token goes in $KVGATE_ENDPOINT_TOKEN instead. Errors show the URL redacted."""
    shown = redacted(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a port that is no number in 0…65535)
    except ValueError as exc:
        raise BadInput(f"{where}: {shown!r} is not a URL ({exc}); give http(s)://HOST[:PORT]") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"{where}: {shown!r} is not an http:// or https:// URL with a host")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise BadInput(f"{where}: {shown!r} holds a space or control character")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise BadInput(
            f"{where}: {shown!r} holds credentials or a query, which kvgate would store in the run; "
            f"give the bare server URL and put a token in ${TOKEN_ENV} (sent as a Bearer header)"
        )


def redacted(url: str) -> str:
    """`url` with any user:password@, query and fragment replaced by "…" (safe to print or store)."""
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    head, tail = url[:cut], "?…" if cut < len(url) else ""
    scheme, sep, rest = head.rpartition("://")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "…@" + authority.rsplit("@", 1)[1]
    return f"{scheme}{sep}{authority}{slash}{path}{tail}"[:200]


def normalise_url(url: str, where: str) -> str:
    """`url` without a trailing slash or `/v1` (kvgate adds the paths), checked by `check_url`."""
    check_url(url, where)
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def parse_endpoints(items: Iterable[str]) -> dict[str, str]:
    """`ARM=URL` items as {arm: url}; an arm given twice, or a malformed item, is refused."""
    endpoints: dict[str, str] = {}
    for item in items:
        arm, sep, url = item.partition("=")
        where = f"--endpoint {arm[:64]!r}={redacted(url)!r}" if sep else f"--endpoint {redacted(item)!r}"
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
