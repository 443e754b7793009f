"""`make demo` fails unless the gate passes (its recipe exits with kvgate's code), so CI must not call it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("code", [0, 1, 3])
def test_make_demo_exits_with_the_gates_code(tmp_path: Path, code: int) -> None:
    stamp, llama = tmp_path / "setup-done", tmp_path / "llama-server-done"
    later = time.time() + 3600
    for done in (stamp, llama):  # newer than pyproject.toml, the Makefile and the build: no set-up runs
        done.touch()
        os.utime(done, (later, later))
    gate = tmp_path / "kvgate"
    gate.write_text(f"#!/bin/sh\necho gate\nexit {code}\n")
    gate.chmod(0o755)
    argv = [
        "make",
        "-s",
        "-C",
        str(REPO),
        "demo",
        f"STAMP={stamp}",
        f"LLAMA_SERVER_STAMP={llama}",
        f"KVGATE={gate}",
    ]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert f"kvgate run exited {code} (0 pass, 1 gate failed" in result.stdout
    if code == 0:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0 and f"Error {code}" in result.stderr


def test_ci_does_not_run_the_demo() -> None:
    assert "make demo" not in (REPO / ".ci" / "run").read_text()
