"""Secrets in endpoint URLs (user:password, query tokens, fragments) and in `$KVGATE_ENDPOINT_TOKEN`: the
secret must appear in nothing kvgate prints or writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from hostile.case import REFUSED, SECRET, SERVED, SERVER_ENV, Case, run_argv, served_run_argv


def secret_class(base: Path, servers: dict[str, str]) -> Iterator[Case]:
    host = servers["ok"].removeprefix("http://")
    forms = [
        f"https://user:{SECRET}@{host}",
        f"http://{SECRET}@{host}",
        f"http://u:{SECRET}@{host}/v1",
        f"http://{host}/?token={SECRET}",
        f"http://{host}/v1?api_key={SECRET}",
        f"http://{host}/v1#{SECRET}",
        f"http://{host}/v1?x=1&token={SECRET}",
        f"http://user:{SECRET}@127.0.0.1:9",
        f"fp8-e4m3=http://u:{SECRET}@{host}",
    ]
    for form in forms:
        endpoint = form if form.startswith("fp8") else f"*={form}"
        for variant, extra in [
            ("run", []),
            ("run --json", ["--json"]),
            ("run --arms", ["--arms", "fp8-e4m3"]),
        ]:
            argv = served_run_argv(base, endpoint, "-E", "timeout_s=2", *extra)
            yield Case(
                "secret",
                f"{form.replace(SECRET, 'SECRET')[:50]} ({variant})",
                argv,
                [],
                REFUSED,
                dict(SERVER_ENV),
            )
    for variant, extra in [
        ("env token", []),
        ("env token --json", ["--json"]),
        ("env token verbose", ["--verbose"]),
    ]:
        argv = served_run_argv(base, f"*={servers['ok']}", "-E", "timeout_s=2", *extra)
        closed = served_run_argv(base, "*=http://127.0.0.1:9", "-E", "timeout_s=2", *extra)
        yield Case("secret", variant, argv, [], {0, 1, 3, 4}, {"KVGATE_ENDPOINT_TOKEN": SECRET, **SERVER_ENV})
        yield Case(
            "secret",
            variant + " (closed port)",
            closed,
            [],
            SERVED,
            {"KVGATE_ENDPOINT_TOKEN": SECRET, **SERVER_ENV},
        )
    yield Case(
        "secret",
        "-E with a secret value",
        run_argv(base, "-E", f"api_key={SECRET}"),
        [],
        REFUSED,
    )
