"""The python_tests validator's sandbox: correct, wrong, looping, memory-hungry and networked code."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kvgate.validators import python_tests
from kvgate.validators.registry import get_validator

TESTS = "assert add_one(1) == 2\nassert add_one(-5) == -4\n"
FAST = {"timeout_s": 2}


def run(code: str, args: dict[str, Any] | None = None, tests: str = TESTS) -> tuple[bool, str | None, str]:
    validator = get_validator("python_tests")
    validator.check_args(tests, args or FAST)
    verdict = validator(f"Here you go:\n```python\n{code}\n```\nDone.", tests, args or FAST)
    return verdict.passed, verdict.fail_kind, verdict.detail


def test_correct_code_passes() -> None:
    assert run("def add_one(x):\n    return x + 1")[:2] == (True, None)


def test_stdlib_imports_work_and_main_blocks_do_not_run() -> None:
    code = (
        "import json, math\ndef add_one(x):\n    return int(math.floor(x)) + 1\n"
        "if __name__ == '__main__':\n    input()"
    )
    assert run(code)[:2] == (True, None)


def test_wrong_code_is_a_mismatch_naming_the_failing_test() -> None:
    passed, kind, detail = run("def add_one(x):\n    return x")
    assert (passed, kind) == (False, "mismatch")
    assert "assert add_one(1) == 2" in detail


def test_an_exception_in_the_tests_is_a_mismatch() -> None:
    assert run("def add_one(x):\n    return x / 0")[1] == "mismatch"
    assert run("def other(x):\n    return x + 1")[1] == "mismatch"  # NameError: wrong function


@pytest.mark.parametrize(
    "output",
    ["", "I don't know.", "```python\ndef add_one(x) return x\n```", "```python\nraise SystemExit(0)\n```"],
)
def test_no_usable_code_is_invalid(output: str) -> None:
    verdict = get_validator("python_tests")(output, TESTS, FAST)
    assert verdict.fail_kind == "invalid", verdict


def test_exiting_before_the_tests_is_not_a_pass() -> None:
    assert run("import os\nos._exit(0)")[1] == "invalid"


def test_an_endless_loop_times_out() -> None:
    start = time.monotonic()
    passed, kind, _ = run("def add_one(x):\n    while True:\n        pass", {"timeout_s": 1})
    assert (passed, kind) == (False, "timeout")
    assert time.monotonic() - start < 10


def test_sleeping_and_leftover_children_are_killed() -> None:
    code = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\ndef add_one(x):\n    time.sleep(60)"
    start = time.monotonic()
    assert run(code, {"timeout_s": 1})[1] == "timeout"
    assert time.monotonic() - start < 10


@pytest.mark.parametrize(
    "code",
    [
        "blob = bytearray(10 * 1024 ** 3)\ndef add_one(x):\n    return x + 1",
        "def add_one(x):\n    return len([0] * (10 * 1024 ** 3)) + x",
        "def add_one(x):\n    chunks = []\n    while True:\n        chunks.append(bytearray(50 * 1024 ** 2))",
    ],
)
def test_allocating_10_gb_is_invalid_and_never_hangs(code: str) -> None:
    start = time.monotonic()
    passed, kind, detail = run(code, {"timeout_s": 5})
    assert (passed, kind) == (False, "invalid"), detail
    assert "MemoryError" in detail
    assert time.monotonic() - start < 10


NETWORK = [
    "import socket\ndef add_one(x):\n    socket.create_connection(('127.0.0.1', 80), timeout=1)\n"
    "    return x + 1",
    "import socket\ndef add_one(x):\n    socket.getaddrinfo('example.com', 443)\n    return x + 1",
    "import urllib.request\ndef add_one(x):\n"
    "    urllib.request.urlopen('http://127.0.0.1:8080/', timeout=1)\n    return x + 1",
]


@pytest.mark.parametrize("code", NETWORK)
def test_no_network_in_the_sandbox(code: str) -> None:
    passed, kind, detail = run(code)
    assert not passed and kind == "mismatch", detail
    assert any(
        word in detail for word in ("Network is unreachable", "disabled", "name resolution", "URLError")
    )


@pytest.mark.parametrize("code", NETWORK)
def test_no_network_with_the_socket_guard_fallback(code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(python_tests, "_isolation", lambda: ("socket-block", ()))
    passed, kind, detail = run(code)
    assert not passed and kind == "mismatch", detail
    assert "network access is disabled" in detail


def test_the_socket_guard_leaves_local_socketpairs_working(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(python_tests, "_isolation", lambda: ("socket-block", ()))
    code = (
        "import asyncio\ndef add_one(x):\n    async def f():\n        return x + 1\n"
        "    return asyncio.run(f())"
    )
    assert run(code)[:2] == (True, None)


def test_which_isolation_applies_here() -> None:
    # root in this project's containers can create a network namespace; elsewhere the guard applies
    assert python_tests.network_isolation() in ("netns", "netns-userns", "socket-block")


def test_code_extraction() -> None:
    assert python_tests.extract_code("```js\nx\n```\n```python\ny = 1\n```") == "y = 1\n"
    assert python_tests.extract_code("```\nz = 2\n```") == "z = 2\n"
    assert python_tests.extract_code("def f(): pass") == "def f(): pass"


@pytest.mark.parametrize(
    ("tests", "args"),
    [("", {}), ("assert (", {}), (TESTS, {"timeout_s": 0}), (TESTS, {"memory_mb": 1}), (TESTS, {"cpu": 1})],
)
def test_bad_arguments(tests: str, args: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        get_validator("python_tests").check_args(tests, args)
