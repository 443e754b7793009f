"""`kvgate run --engine server` end to end against the stub: given endpoints, and launched per arm from a
command template. The planted race is caught and attributed to its arm at concurrency ≥ k and not at 1;
a server that dies mid-pass exits 4 with its rows kept and is started afresh on --resume."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")
from click.testing import CliRunner, Result
from helpers.matrix_run import run_matrix
from stub_server import StubServer, launch_template, start_stub

from kvgate.cli import cli
from kvgate.engines.server.record import read_records
from kvgate.rundir.store import read_results

MATRIX = """[matrix]
control = "full"
candidates = ["prefix-reuse"]
aa_replicate = false
[arm.prefix-reuse]
concurrency = {concurrency}
"""


@pytest.fixture
def stubs(answers: dict[str, str]) -> Iterator[Any]:
    started: list[StubServer] = []

    def make(**options: Any) -> StubServer:
        started.append(start_stub(answers, **{"latency_s": 0.002, **options}))
        return started[-1]

    yield make
    for server in started:
        server.stop()


def run(tmp_path: Path, workload: Path, model: Path, concurrency: int, *extra: str) -> Result:
    return run_matrix(
        tmp_path, MATRIX.format(concurrency=concurrency), workload, model, *extra, name=f"c{concurrency}"
    )


def run_dir_of(result: Result) -> Path:
    line = next(x for x in result.output.splitlines() if x.startswith("results: "))
    return Path(line.removeprefix("results: "))


@pytest.mark.parametrize("concurrency", [1, 4])
def test_given_endpoints_catch_the_planted_race_only_under_concurrency(
    concurrency: int, stubs: Any, smoke_workload: Path, stub_model: Path, tmp_path: Path
) -> None:
    control = stubs()
    candidate = stubs(prefix_caching=True, fault_k=2, fault_share=0.25, seed=7, latency_s=0.02)
    endpoints = ["--endpoint", f"full={control.url}", "--endpoint", f"prefix-reuse={candidate.url}"]
    result = run(tmp_path, smoke_workload, stub_model, concurrency, *endpoints, "-E", "block_size=16")
    defects = [x for x in result.output.splitlines() if x.startswith("kvgate: defect:")]
    if concurrency == 1:
        assert result.exit_code == 3 and not defects  # the smoke suite is too small to pass, by design
    else:
        assert result.exit_code == 1 and defects
        assert all("lossless arm 'prefix-reuse'" in d and "under concurrency 4" in d for d in defects)
    manifest = json.loads((run_dir_of(result) / "manifest.json").read_text())
    assert "cache_salt" in manifest["engine"]["isolation"] and manifest["engine"]["form"] == "endpoint"
    report = CliRunner().invoke(cli, ["report", str(run_dir_of(result)), "--format", "json"])
    assert report.exit_code == result.exit_code  # the report reads the same stored findings
    assert [x for x in report.stderr.splitlines() if x.startswith("kvgate: defect:")] == defects


def test_a_server_that_dies_mid_pass_exits_4_keeps_its_rows_and_restarts_on_resume(
    smoke_workload: Path, stub_model: Path, answers_file: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "died-once"
    command = launch_template(
        answers_file, "--die-after 10", f"--die-marker {marker}", "--preempt-at 2", "--latency-s 0.005"
    )
    first = run(tmp_path, smoke_workload, stub_model, 4, "--engine", "server", "-E", f"command={command}")
    assert first.exit_code == 4, first.output
    assert "the server exited with status 3" in first.output and "--resume" in first.output
    run_dir = Path(next(iter((tmp_path / "runs").iterdir())))
    kept = read_results(run_dir, ["case_id"]).num_rows
    assert 0 < kept < 24
    resumed = CliRunner().invoke(cli, ["run", "--resume", str(run_dir)])
    assert resumed.exit_code == 3, resumed.output
    assert read_results(run_dir, ["case_id"]).num_rows == 48
    records = read_records(run_dir)
    assert [r["arm"] for r in records] == ["full", "full", "prefix-reuse"]  # the control's server, restarted
    assert all(r["form"] == "launched" and (run_dir / r["log"]).exists() for r in records)
    assert records[-1]["concurrency"] == 4 and records[-1]["preemptions"] > 0
    assert "preemptions" in resumed.output


def test_a_leaking_salt_on_a_given_endpoint_exits_4(
    stubs: Any, smoke_workload: Path, stub_model: Path, tmp_path: Path
) -> None:
    leaky = stubs(prefix_caching=True, leak_salt=True)
    endpoints = ["--endpoint", f"full={stubs().url}", "--endpoint", f"prefix-reuse={leaky.url}"]
    result = run(tmp_path, smoke_workload, stub_model, 1, *endpoints)
    assert result.exit_code == 4
    assert "arm 'prefix-reuse'" in result.output and "cache_salt does not isolate namespaces" in result.output


def test_an_offload_arm_reads_back_after_the_device_cache_is_reset(
    smoke_workload: Path, stub_model: Path, answers_file: Path, tmp_path: Path
) -> None:
    matrix = tmp_path / "offload.toml"
    matrix.write_text(
        '[matrix]\ncontrol = "full"\ncandidates = ["reuse-offload"]\naa_replicate = false\n'
        '[treatment.reuse-offload]\nkind = "composite"\nof = ["prefix-reuse", "offload-host"]\n'
    )
    argv = ["run", "-w", str(smoke_workload), "-m", str(matrix), "--model", str(stub_model), "--limit", "4"]
    options = ["--engine", "server", "-E", "device=gpu", "-E", f"command={launch_template(answers_file)}"]
    result = CliRunner().invoke(cli, [*argv, *options, "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 3, result.output
    (log,) = (tmp_path / "run" / "server").glob("reuse-offload.*.log")
    assert "reset_prefix_cache" in log.read_text()  # between the warm-up and the measured requests
    assert "--kv-offloading-size" in read_records(tmp_path / "run")[-1]["command"]
