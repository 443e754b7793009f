"""Run the model's Python code against the case's unit tests in a sandboxed subprocess.

``expected`` is test code (typically ``assert`` lines) run in the namespace the model's code defined.
The code is the first ```python fenced block of the output (else the first fenced block, else the
whole output). Arguments: ``timeout_s`` (wall clock, default 10) and ``memory_mb`` (address space,
default 512).

The sandbox, in order of what it stops:

- a fresh temporary directory as the working directory, removed afterwards; stdin closed; a minimal
  environment; ``python -I -S`` (isolated mode: no user site, no PYTHON* variables, no ``site``, so
  only the standard library is importable);
- resource limits set by the runner before any model code runs: RLIMIT_AS (memory_mb), RLIMIT_CPU
  (timeout_s + 1 s, then SIGXCPU), RLIMIT_NOFILE (64), RLIMIT_FSIZE (16 MiB), RLIMIT_CORE (0). They are
  set in the child's own first lines rather than in a ``preexec_fn``, which CPython documents as unsafe
  when the parent has threads (an engine process does);
- the wall-clock timeout kills the whole process group (``start_new_session``);
- no network: the process runs in a new, empty network namespace (``unshare -n``; ``unshare -rn``
  through a user namespace when not privileged) where even 127.0.0.1 is unreachable and DNS fails.
  Where neither works (a container that forbids namespaces), the runner instead replaces
  ``_socket.socket`` (through which ``socket.socket`` initialises) and the resolver functions with ones
  that refuse any non-Unix socket or lookup: a best-effort guard that C extensions (ctypes) or spawned
  programs could bypass.
  `network_isolation()` says which applies here.

The code still runs as the calling user and can read what that user can; run kvgate unprivileged, or in
a container, when judging untrusted models.

Verdicts: tests pass → ok; an assertion or exception in the tests → ``mismatch``; no code, a syntax
error, an exception while defining the code, MemoryError or a kill by signal → ``invalid``; wall clock
or CPU limit exceeded → ``timeout``; a sandbox that fails to start → ``engine_error``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvgate.validators.base import Verdict

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_MB = 512
_ARGS = {"timeout_s", "memory_mb"}

_FENCE = re.compile(r"```([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)

# exit statuses of the runner
_SOLUTION_ERROR, _ASSERTION, _TEST_ERROR, _MEMORY = 10, 11, 12, 13

_NO_NETWORK = """
import socket as _kv_socket, _socket as _kv_raw

def _kv_refuse(*args, **kwargs):
    raise PermissionError(13, "network access is disabled in the kvgate sandbox")

_kv_raw_socket = _kv_raw.socket

class _KvRawSocket(_kv_raw_socket):
    # socket.socket.__init__ calls _socket.socket.__init__ by name, so this guards both classes
    def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
        if fileno is None and family != _kv_raw.AF_UNIX:
            _kv_refuse()
        _kv_raw_socket.__init__(self, family, type, proto, fileno)

_kv_raw.socket = _KvRawSocket
for _kv_name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo",
                 "create_connection", "create_server"):
    for _kv_mod in (_kv_socket, _kv_raw):
        if hasattr(_kv_mod, _kv_name):
            setattr(_kv_mod, _kv_name, _kv_refuse)
"""

_RUNNER = """
import os, resource, sys, traceback
os.write(1, b"{started}\\n")

def _limit(which, soft, hard=None):
    hard = soft if hard is None else hard
    _, current = resource.getrlimit(which)
    if current != resource.RLIM_INFINITY:
        soft, hard = min(soft, current), min(hard, current)
    resource.setrlimit(which, (soft, hard))

_limit(resource.RLIMIT_AS, {memory})
_limit(resource.RLIMIT_CPU, {cpu}, {cpu} + 1)
_limit(resource.RLIMIT_NOFILE, 64)
_limit(resource.RLIMIT_FSIZE, 16 * 1024 * 1024)
_limit(resource.RLIMIT_CORE, 0)
{network}
with open("solution.py", encoding="utf-8") as _f:
    _solution = _f.read()
with open("tests.py", encoding="utf-8") as _f:
    _tests = _f.read()

def _finish(code, message=""):
    try:
        os.write(2, message[-2000:].encode("utf-8", "replace") + b"\\n")
    finally:
        os._exit(code)

def _where(exc, filename):
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    line = frames[-1] if frames else None
    return f"{{filename}} line {{line.lineno}}: {{line.line}}: " if line else ""

_ns = {{"__name__": "solution", "__builtins__": __builtins__}}
try:
    exec(compile(_solution, "solution.py", "exec"), _ns)
except MemoryError:
    _finish({memory_exit}, "MemoryError while defining the solution")
except BaseException as _e:
    _finish({solution_exit}, _where(_e, "solution.py") + f"{{type(_e).__name__}}: {{_e}}")
try:
    exec(compile(_tests, "tests.py", "exec"), _ns)
except MemoryError:
    _finish({memory_exit}, "MemoryError in the tests")
except AssertionError as _e:
    _finish({assertion_exit}, _where(_e, "tests.py") + f"AssertionError {{_e}}".strip())
except BaseException as _e:
    _finish({test_exit}, _where(_e, "tests.py") + f"{{type(_e).__name__}}: {{_e}}")
os.write(1, b"\\n{passed}\\n")
_finish(0)
"""


@functools.cache
def _isolation() -> tuple[str, tuple[str, ...]]:
    unshare = shutil.which("unshare")
    if unshare:
        for flags, label in ((("-n",), "netns"), (("-r", "-n"), "netns-userns")):
            try:
                probe = subprocess.run([unshare, *flags, "--", "true"], capture_output=True, timeout=10)
            except (OSError, subprocess.SubprocessError):
                continue
            if probe.returncode == 0:
                return label, (unshare, *flags, "--")
    return "socket-block", ()


def network_isolation() -> str:
    """How the sandbox cuts the network here: "netns", "netns-userns" or "socket-block" (see above)."""
    return _isolation()[0]


def extract_code(output: str) -> str:
    """The first ```python block, else the first fenced block, else the whole output."""
    blocks = _FENCE.findall(output)
    for lang, body in blocks:
        if lang.lower() in ("python", "py", "python3"):
            return str(body)
    return str(blocks[0][1]) if blocks else output


def _options(expected: Any, args: dict[str, Any]) -> tuple[float, int]:
    if not isinstance(expected, str) or not expected.strip():
        raise ValueError(f"expected must be the unit-test code (a non-empty string), got {expected!r}")
    unknown = sorted(set(args) - _ARGS)
    if unknown:
        raise ValueError(f"unknown argument {unknown[0]!r}; known: {', '.join(sorted(_ARGS))}")
    timeout = args.get("timeout_s", DEFAULT_TIMEOUT_S)
    memory = args.get("memory_mb", DEFAULT_MEMORY_MB)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
        raise ValueError(f"timeout_s must be a number in (0, 600], got {timeout!r}")
    if isinstance(memory, bool) or not isinstance(memory, int) or not 64 <= memory <= 65536:
        raise ValueError(f"memory_mb must be an integer in [64, 65536], got {memory!r}")
    return float(timeout), memory


@dataclass(frozen=True)
class PythonTests:
    """Pass when the model's code passes the case's unit tests in the sandbox."""

    name: str

    def check_args(self, expected: Any, args: dict[str, Any]) -> None:
        _options(expected, args)
        try:
            compile(expected, "tests.py", "exec")
        except SyntaxError as exc:
            raise ValueError(f"the unit tests do not compile: {exc}") from None

    def __call__(self, output: str, expected: Any, args: dict[str, Any]) -> Verdict:
        timeout, memory = _options(expected, args)
        code = extract_code(output)
        if not code.strip():
            return Verdict.fail("invalid", "no code in the output")
        return run_sandboxed(code, expected, timeout, memory)


def run_sandboxed(code: str, tests: str, timeout_s: float, memory_mb: int) -> Verdict:
    """Run `code` then `tests` in the sandbox described in the module docstring."""
    _, prefix = _isolation()
    started, passed = f"kvgate-started-{secrets.token_hex(8)}", f"kvgate-passed-{secrets.token_hex(8)}"
    runner = _RUNNER.format(
        started=started,
        passed=passed,
        memory=memory_mb * 1024 * 1024,
        cpu=math.ceil(timeout_s) + 1,
        network="" if prefix else _NO_NETWORK,
        solution_exit=_SOLUTION_ERROR,
        assertion_exit=_ASSERTION,
        test_exit=_TEST_ERROR,
        memory_exit=_MEMORY,
    )
    with tempfile.TemporaryDirectory(prefix="kvgate-py-") as tmp:
        work = Path(tmp)
        (work / "solution.py").write_text(code, encoding="utf-8")
        (work / "tests.py").write_text(tests, encoding="utf-8")
        (work / "runner.py").write_text(runner, encoding="utf-8")
        env = {"PATH": os.defpath, "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8"}
        out_path, err_path = work / ".stdout", work / ".stderr"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(
                [*prefix, sys.executable, "-I", "-S", "runner.py"],
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                close_fds=True,
            )
            timed_out = False
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc.pid)
                rc = proc.wait()
        head, stdout = _head(out_path, 256), _tail(out_path, 1 << 16)
        detail = _tail(err_path, 4096).strip().splitlines()
        last = detail[-1][:200] if detail else ""
    if started not in head:
        return Verdict.fail("engine_error", f"the sandbox did not start: {last or f'exit status {rc}'}")
    if timed_out:
        return Verdict.fail("timeout", f"no result within {timeout_s:g} s")
    if rc == -signal.SIGXCPU:
        return Verdict.fail("timeout", "CPU time limit exceeded")
    if rc == 0:
        return (
            Verdict.ok()
            if passed in stdout
            else Verdict.fail("invalid", "the code exited before the tests ran")
        )
    if rc in (_ASSERTION, _TEST_ERROR):
        return Verdict.fail("mismatch", last)
    if rc in (_SOLUTION_ERROR, _MEMORY):
        return Verdict.fail("invalid", last)
    if rc < 0:
        return Verdict.fail("invalid", f"killed by signal {_signal_name(-rc)}")
    return Verdict.fail("invalid", last or f"exit status {rc}")


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _head(path: Path, limit: int) -> str:
    with path.open("rb") as f:
        return f.read(limit).decode("utf-8", "replace")


def _tail(path: Path, limit: int) -> str:
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - limit))
        return f.read().decode("utf-8", "replace")
