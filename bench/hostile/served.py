"""A misbehaving OpenAI-compatible server on loopback (`servers.py`) × three timeouts, and endpoint URLs
that can never work."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from hostile.case import SERVED, SERVER_ENV, Case, served_run_argv


def server_class(base: Path, servers: dict[str, str]) -> Iterator[Case]:
    """A misbehaving OpenAI-compatible server on loopback (stub faults and raw protocol abuse)."""
    for mode, url in servers.items():
        for variant, extra in [
            ("timeout 2", ["-E", "timeout_s=2"]),
            ("timeout 1 limit 1", ["-E", "timeout_s=1", "--limit", "1"]),
            ("default timeout", ["--limit", "1"]),
        ]:
            if variant == "default timeout" and mode in ("trickle", "trickle-models", "silent", "length-lie"):
                extra = ["-E", "timeout_s=5", "--limit", "1"]
            argv = served_run_argv(base, f"*={url}", *extra, limit=None, quiet=True)
            expect = (
                {0, 1, 3, 4} if mode in ("ok", "flaky-reset", "flaky-503", "slow", "malformed") else SERVED
            )
            yield Case("server", f"{mode} ({variant})", argv, [], expect, dict(SERVER_ENV))
    for url in [
        "ftp://127.0.0.1:9",
        "http://",
        "http:///v1",
        "http://127.0.0.1:99999",
        "http://[::1",
        "file:///etc/passwd",
        "http://127.0.0.1:1/",
        "unix:///tmp/x",
        "http://0.0.0.0:0",
        "http://" + "a" * 300 + ":80",
    ]:
        argv = served_run_argv(base, f"*={url}", "-E", "timeout_s=2", matrix=None)
        yield Case("server", f"endpoint {url[:40]}", argv, [], SERVED, dict(SERVER_ENV))
