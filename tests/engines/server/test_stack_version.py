"""The serving stack's version: each flavour reads it where its stack names it (the stub answers in each
stack's shape), the run records the first server's in its manifest, and a server of another version,
another arm's or a resumed run's, is refused in one line (exit 2) naming both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("httpx")
from click.testing import CliRunner
from helpers.matrix_run import run_matrix
from stub_server import StubServer, launch_template, start_stub

from kvgate.cli import cli
from kvgate.engines.base import ArmSetup
from kvgate.engines.server.engine import ServerEngine
from kvgate.engines.server.record import read_records
from kvgate.engines.server.stack_version import VLLM, VersionAnswer
from kvgate.errors import BadInput
from kvgate.models import resolve_model
from kvgate.rundir.manifest import read_manifest, write_manifest
from kvgate.rundir.store import read_results
from kvgate.treatments.spec import Full

MATRIX = '[matrix]\ncontrol = "full"\ncandidates = ["prefix-reuse"]\naa_replicate = false\n'


@pytest.mark.parametrize(
    ("flavour", "stack", "source"),
    [
        ("vllm", "vLLM", "GET /version version"),
        ("llama-server", "llama-server", "GET /props build_info"),
        ("sglang", "SGLang", "GET /get_server_info version"),
        ("trtllm", "TensorRT-LLM", "GET /version version"),
    ],
)
def test_each_stack_names_its_version_where_its_code_says(
    flavour: str, stack: str, source: str, answers: dict[str, str], stub_model: Path, tmp_path: Path
) -> None:
    server = start_stub(answers, version="0.9.1-abc")
    try:
        engine = ServerEngine(resolve_model(str(stub_model)), endpoints={"*": server.url}, flavour=flavour)
        session = engine.open(ArmSetup("full", 0, Full("full"), "t:full", run_dir=tmp_path))
        session.close()
    finally:
        server.stop()
    named = {"stack": stack, "version": "0.9.1-abc", "source": source}
    assert session.stack_version == named
    assert [r["stack_version"] for r in read_records(tmp_path)] == [named]


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (404, b'{"version": "1"}'),
        (200, b"not json"),
        (200, b'["1.0"]'),
        (200, b'{"version": 1}'),
        (200, b'{"version": ""}'),
        (200, b'{"version": "a\\nb"}'),
        (200, json.dumps({"version": "v" * 201}).encode()),
        (200, b"[" * 100_000),
        (None, b""),
    ],
)
def test_an_answer_that_names_no_version_is_recorded_as_none(status: int | None, body: bytes) -> None:
    assert VLLM.recorded(status, body) == {"stack": "vLLM", "version": None, "source": "GET /version version"}
    assert VersionAnswer("x", "/v", "version").recorded(200, b'{"version": "1.2"}')["version"] == "1.2"


def test_a_resume_against_another_server_version_is_refused(
    smoke_workload: Path,
    stub_model: Path,
    answers_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The launched server dies mid-pass; the resumed run's server (the same command, another build)
    names another version: refused before a row, exit 2, both versions named; with the first build
    back it completes, also when its manifest predates the field."""
    command = launch_template(answers_file, "--die-after 10", f"--die-marker {tmp_path / 'died'}")
    monkeypatch.setenv("STUB_SERVER_VERSION", "stub-1")
    code = run_matrix(
        tmp_path, MATRIX, smoke_workload, stub_model, "--engine", "server", "-E", f"command={command}"
    ).exit_code
    assert code == 4
    run_dir = next(iter((tmp_path / "runs").iterdir()))
    recorded = {"stack": "vLLM", "version": "stub-1", "source": "GET /version version"}
    assert read_manifest(run_dir)["stack_version"] == recorded
    kept = read_results(run_dir, ["case_id"]).num_rows
    monkeypatch.setenv("STUB_SERVER_VERSION", "stub-2")
    refused = CliRunner().invoke(cli, ["run", "--resume", str(run_dir)])
    assert refused.exit_code == 2, refused.output
    (line,) = [x for x in refused.output.splitlines() if x.startswith("kvgate: error")]
    assert "vLLM stub-1" in line and "vLLM stub-2" in line and "start a new run" in line
    assert read_results(run_dir, ["case_id"]).num_rows == kept
    manifest = read_manifest(run_dir)
    with pytest.raises(BadInput, match="stack_version/version"):  # checked at write as at read
        write_manifest(run_dir, {**manifest, "stack_version": {**recorded, "version": 3}})
    del manifest["stack_version"]  # as a run made before kvgate recorded it: readable, and recorded now
    write_manifest(run_dir, manifest)
    monkeypatch.setenv("STUB_SERVER_VERSION", "stub-1")
    resumed = CliRunner().invoke(cli, ["run", "--resume", str(run_dir)])
    assert resumed.exit_code == 3, resumed.output
    assert read_results(run_dir, ["case_id"]).num_rows == 48
    assert read_manifest(run_dir)["stack_version"] == recorded
    report = CliRunner().invoke(cli, ["report", str(run_dir), "--format", "json"])
    assert json.loads(report.stdout)["run"]["stack_version"] == recorded
    text = CliRunner().invoke(cli, ["report", str(run_dir), "--format", "md"])
    assert "engine server (vLLM stub-1)" in text.stdout


def test_arms_on_servers_of_two_versions_are_refused(
    answers: dict[str, str], smoke_workload: Path, stub_model: Path, tmp_path: Path
) -> None:
    servers: list[StubServer] = [start_stub(answers), start_stub(answers, version="stub-2")]
    try:
        endpoints = ["--endpoint", f"full={servers[0].url}", "--endpoint", f"prefix-reuse={servers[1].url}"]
        result = run_matrix(tmp_path, MATRIX, smoke_workload, stub_model, *endpoints)
        code, output = result.exit_code, result.output
    finally:
        for server in servers:
            server.stop()
    assert code == 2, output
    assert "its rows come from vLLM stub-1, but the server of arm 'prefix-reuse' is vLLM stub-2" in output
