"""One TLS context for every HTTP client of a run: httpx builds one per client otherwise, loading the
certificate store each time (0.1 s here), which a run of many short sessions would pay again and again."""

from __future__ import annotations

import ssl
from functools import cache


@cache
def tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()
