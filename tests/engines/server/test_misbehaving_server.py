"""A misbehaving OpenAI-compatible server on loopback: every exchange ends by its deadline, however
slowly the server answers, no answer is read past the byte cap, and what it sends that no model can
(token ids beyond int32, JSON nested 100,000 deep) is an engine error of that case, never exit 70.
kvgate runs in a child process, so a hang is a timeout of this test and its peak memory is measured."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from stub_server import StubServer, start_stub

from kvgate.rundir.store import read_results
from kvgate.workload.freeze import freeze
from kvgate.workload.tokenizer import WordTokenizer

MATRIX = '[matrix]\ncontrol = "full"\ncandidates = ["prefix-reuse"]\naa_replicate = false\n'
CAP_S = 60.0
"""What a case may take before this test calls it a hang."""


@pytest.fixture(scope="module")
def model_and_workload(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A weightless model folder and the smoke suite frozen with word ids under that folder's name
    (the stub reads word ids, and the run accepts a workload frozen for its model)."""
    root = tmp_path_factory.mktemp("misbehaving")
    model = root / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "stub"}))

    class ForTheStub(WordTokenizer):
        name = str(model)

    freeze(["smoke"], root / "w.parquet", ForTheStub(), seed=0)
    (root / "m.toml").write_text(MATRIX)
    return model, root / "w.parquet"


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[StubServer]:
    stub = start_stub({}, misbehave=request.param)
    yield stub
    stub.stop()


LAUNCHER = (
    "import os, subprocess, sys\n"
    "child = subprocess.Popen(sys.argv[1:])\n"
    "_, status, usage = os.wait4(child.pid, 0)\n"
    "print(f'peak-rss-kib {usage.ru_maxrss}', file=sys.stderr)\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)
"""Runs kvgate and reports its peak RSS. kvgate must be forked from this small process, not from pytest:
Linux counts the RSS a process had when it was forked into its child's ru_maxrss (a child forked from
a pytest that has loaded models reads ≈ 2 GiB before it does anything)."""


def run_child(args: list[str], cap_s: float) -> tuple[int, str, float, int]:
    """(exit code, output, wall seconds, peak RSS in KiB) of `kvgate ARGS` in a child process, killed
    with its process group at `cap_s`."""
    start = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, sys.executable, "-c", "from kvgate.cli import main; main()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    timer = threading.Timer(cap_s, lambda: os.killpg(child.pid, signal.SIGKILL))
    timer.start()
    assert child.stdout is not None
    output = child.stdout.read().decode(errors="replace")
    child.wait()
    timer.cancel()
    *lines, last = output.rstrip("\n").split("\n")
    peak_kib = int(last.split()[-1]) if last.startswith("peak-rss-kib ") else 1 << 30
    return child.returncode, "\n".join(lines) + "\n", time.monotonic() - start, peak_kib


def kvgate_run(
    model_and_workload: tuple[Path, Path], url: str, tmp_path: Path
) -> tuple[int, str, float, int]:
    model, workload = model_and_workload
    args = ["run", "-w", str(workload), "-m", str(workload.parent / "m.toml"), "--model", str(model)]
    args += ["--endpoint", f"*={url}", "-E", "timeout_s=2", "--limit", "2", "-o", str(tmp_path / "runs")]
    return run_child(args, CAP_S)


@pytest.mark.parametrize(
    ("server", "code", "message", "within_s"),
    [
        ("trickle-models", 4, "/v1/models gave no answer within 2 s", 20),
        ("trickle", 4, "no answer within the per-case limit of 2 s", 40),
        ("endless", 4, "more than the cap of 67108864 bytes", 40),
        ("huge-ids", 4, "token ids in [0, 2^31)", 40),
        ("deep", 4, "JSON nested too deeply", 40),
    ],
    indirect=["server"],
)
def test_a_misbehaving_server_is_bounded_in_time_and_bytes(
    model_and_workload: tuple[Path, Path],
    server: StubServer,
    tmp_path: Path,
    code: int,
    message: str,
    within_s: float,
) -> None:
    exit_code, output, wall_s, peak_kib = kvgate_run(model_and_workload, server.url, tmp_path)
    assert exit_code == code, (exit_code, wall_s, output[-600:])
    assert "Traceback" not in output and "internal error" not in output, output[-600:]
    assert wall_s < within_s, (wall_s, output[-300:])
    assert peak_kib < 1 << 20, f"peak RSS {peak_kib} KiB"  # under 1 GiB
    if message:
        details = [] if "/v1/models" in message else _stored(tmp_path / "runs", "detail")
        assert details or message in output, output[-600:]
        assert all(message in d for d in details), details[:2]


def _stored(runs: Path, column: str) -> list[str]:
    """`column` of every row stored under `runs`."""
    return [str(v) for run in runs.iterdir() for v in read_results(run, [column])[column].to_pylist()]


SECRET = "s3cr3t-t0ken-29"


@pytest.mark.parametrize(
    "url",
    [
        "https://user:" + SECRET + "@{host}",
        "http://{host}/?token=" + SECRET,
        "http://{host}/v1#" + SECRET,
    ],
)
def test_a_secret_in_an_endpoint_url_is_refused_unprinted_and_unstored(
    model_and_workload: tuple[Path, Path], tmp_path: Path, url: str
) -> None:
    """Credentials in `--endpoint` were stored in clear in manifest.json and the server records, and
    printed in an error line: now the URL is refused before anything starts, shown redacted."""
    code, output, _, _ = kvgate_run(model_and_workload, url.format(host="127.0.0.1:9"), tmp_path)
    assert code == 2 and "KVGATE_ENDPOINT_TOKEN" in output, output[-400:]
    assert SECRET not in output and output.count("\n") == 1, output
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("server", [""], indirect=True)
def test_a_token_from_the_environment_is_sent_and_never_stored(
    model_and_workload: tuple[Path, Path], server: StubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$KVGATE_ENDPOINT_TOKEN reaches the server as a bearer token (the stub answers 401 without it),
    and no file of the run and no line kvgate prints holds it."""
    server.state.options.token = SECRET
    monkeypatch.setenv("KVGATE_ENDPOINT_TOKEN", SECRET)
    code, output, _, _ = kvgate_run(model_and_workload, server.url, tmp_path)
    assert code in (0, 1, 3, 4) and "401" not in output, output[-600:]
    assert _stored(tmp_path / "runs", "passed"), "no row was generated"
    files = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()]
    assert files and not [p for p in files if SECRET.encode() in p.read_bytes()]
    assert SECRET not in output
    monkeypatch.delenv("KVGATE_ENDPOINT_TOKEN")
    refused, output, _, _ = kvgate_run(model_and_workload, server.url, tmp_path / "without")
    assert refused == 4 and "401" in output, output[-400:]
