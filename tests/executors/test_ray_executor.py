"""`kvgate run --executor ray` on a local Ray cluster of 2 CPUs (one `ray.init` for the module).

The fake engine gives the same report JSON and the same rows as the local executor (timings and the
run's identity aside); so does the hf engine on the embedded model with one thread per worker. A worker
lost mid-unit (the fake engine's `exit_after` ends its process once) costs no row and repeats none; a
driver killed with SIGKILL and then resumed gives the same report as a run never interrupted.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.cli import kvgate
from ray_support import comparable, keys, only_run, stored_rows, write_matrix

from kvgate.runner.passes import namespace

ray = pytest.importorskip("ray")  # the `ray` extra (make setup installs it)
pytestmark = pytest.mark.slow  # a Ray cluster and its workers start for the module

ACCEPT = Path(__file__).parents[1] / "runner" / "data" / "accept.toml"
CASES = 40
LATENCY_S = 0.03
KVGATE = [sys.executable, "-c", "from kvgate.cli import main; main()"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local Ray cluster of 2 CPUs for the module; its address (for a driver in another process)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ray-workload") / "accept.words.parquet"
    frozen = kvgate("freeze", ACCEPT, "-o", path, "--limit", CASES)
    assert frozen.exit_code == 0, frozen.output
    return path


@pytest.fixture(scope="module")
def reference(workload: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The local executor's run of the matrix: its run directory and its report JSON."""
    folder = tmp_path_factory.mktemp("ray-reference")
    matrix = write_matrix(folder / "m.toml", LATENCY_S)
    result = kvgate("run", "--engine", "fake", "-w", workload, "-m", matrix, "-o", folder / "runs", "--json")
    assert result.exit_code == 1, result.output  # fp8-e4m3's planted failures fail the gate
    return only_run(folder / "runs"), result.stdout


def test_fake_engine_gives_the_local_report(
    cluster: str, workload: Path, reference: tuple[Path, str], tmp_path: Path
) -> None:
    matrix = write_matrix(tmp_path / "m.toml", LATENCY_S)
    runs = tmp_path / "runs"
    result = kvgate(
        "run", "--engine", "fake", "-w", workload, "-m", matrix, "-o", runs, "--executor", "ray", "--json"
    )
    assert result.exit_code == 1, result.output
    assert comparable(result.stdout) == comparable(reference[1])
    run_dir = only_run(runs)
    assert stored_rows(run_dir) == stored_rows(reference[0])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["executor"]["kind"] == "ray" and manifest["executor"]["workers"] == 2
    hardware = manifest["hardware"]
    assert set(hardware) == set(manifest["arms"])
    assert len({(e["accelerator"], e["engine_build"]) for arm in hardware.values() for e in arm}) == 1
    assert sum(e["units"] for e in hardware["full"]) >= 8  # the control's pass split over the workers


def test_a_lost_worker_costs_no_row_and_repeats_none(
    cluster: str, workload: Path, reference: tuple[Path, str], tmp_path: Path
) -> None:
    seed = random.randrange(1 << 30)  # a run id of its own: the fault ends one worker once per run
    extra = "[faults.streaming-50]\nexit_after = 3\n"
    matrix = write_matrix(tmp_path / "m.toml", LATENCY_S, seed, extra)
    runs = tmp_path / "runs"
    result = kvgate("run", "--engine", "fake", "-w", workload, "-m", matrix, "-o", runs, "--executor", "ray")
    assert result.exit_code == 1, result.output
    run_dir = only_run(runs)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    marker = _exit_marker(namespace(manifest["run_id"], "streaming-50", 0, 0))
    assert marker.exists(), "the planted fault did not end a worker"
    marker.unlink()
    rows = stored_rows(run_dir)
    assert len(keys(rows)) == len(set(keys(rows))), "a row was stored twice"
    assert rows == stored_rows(reference[0])  # none lost, each as the local executor generates it


def test_driver_killed_then_resumed_gives_the_same_report(
    cluster: str, workload: Path, reference: tuple[Path, str], tmp_path: Path
) -> None:
    matrix = write_matrix(tmp_path / "m.toml", LATENCY_S)
    runs = tmp_path / "runs"
    spec = ["run", "--engine", "fake", "-w", workload, "-m", matrix, "-o", runs, "--quiet"]
    driver = subprocess.Popen(
        [*KVGATE, *map(str, spec), "--executor", "ray", "--ray-address", cluster],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    while not list(runs.glob("*/results/*/part-*.parquet")) and driver.poll() is None:
        assert time.monotonic() < deadline, "the driver stored nothing in 3 minutes"
        time.sleep(0.02)
    time.sleep(0.3)
    driver.send_signal(signal.SIGKILL)
    assert driver.wait(timeout=30) == -signal.SIGKILL, "the driver finished before it was killed"
    run_dir = only_run(runs)
    interrupted = len(stored_rows(run_dir))
    assert 0 < interrupted < len(stored_rows(reference[0]))

    resumed = kvgate("run", "--resume", run_dir, "--executor", "ray", "--json")
    assert resumed.exit_code == 1, resumed.output
    rows = stored_rows(run_dir)
    assert len(keys(rows)) == len(set(keys(rows)))
    assert rows == stored_rows(reference[0])
    assert comparable(resumed.stdout) == comparable(reference[1])
    report = kvgate("report", run_dir, "--format", "json")
    assert comparable(report.stdout) == comparable(reference[1])


@pytest.mark.model
def test_an_engine_the_cluster_cannot_hold_is_refused_before_waiting(
    cluster: str, model_folder: Path, tmp_path: Path
) -> None:
    runs, workload = tmp_path / "runs", tmp_path / "accept.parquet"
    assert kvgate("freeze", ACCEPT, "-o", workload, "--limit", 2, "--model", "smollm2-135m").exit_code == 0
    args = ["run", "--engine", "hf", "-E", "device=cuda", "-w", workload, "-o", runs, "--executor", "ray"]
    result = kvgate(*args)
    assert result.exit_code == 2
    assert "engine 'hf' needs 1 GPU per worker; the Ray cluster has 0 in all" in result.stderr
    assert not runs.exists() or not list(runs.iterdir())


@pytest.mark.model
def test_hf_engine_gives_the_local_report(cluster: str, model_folder: Path, tmp_path: Path) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(
        'name = "tiny"\n[[generate]]\ngenerator = "passkey"\nlengths = [256]\ndepths = [0.2, 0.8]\n'
    )
    workload = tmp_path / "tiny.parquet"
    assert kvgate("freeze", suite, "-o", workload, "--model", "smollm2-135m").exit_code == 0
    matrix = tmp_path / "m.toml"
    matrix.write_text('[matrix]\ncontrol = "full"\ncandidates = ["streaming-50"]\naa_replicate = false\n')
    common = ["run", "-w", workload, "-m", matrix, "--engine", "hf", "-E", "threads=1", "--json"]
    local = kvgate(*common, "-o", tmp_path / "local")
    on_ray = kvgate(*common, "-o", tmp_path / "ray", "--executor", "ray")
    assert local.exit_code in (1, 3), local.output
    assert on_ray.exit_code == local.exit_code, on_ray.output
    assert comparable(on_ray.stdout) == comparable(local.stdout)
    assert stored_rows(only_run(tmp_path / "ray")) == stored_rows(only_run(tmp_path / "local"))


def _exit_marker(ns: str) -> Path:
    import hashlib
    import tempfile

    return Path(tempfile.gettempdir()) / f"kvgate-fake-exit-{hashlib.sha256(ns.encode()).hexdigest()[:16]}"


def test_a_critical_slice_the_control_cannot_carry_stops_before_any_candidate(
    cluster: str, tmp_path: Path
) -> None:
    trace = tmp_path / "qa.jsonl"
    trace.write_text(
        "".join(
            json.dumps(
                {"messages": [{"role": "user", "content": f"What is {i} plus {i}?"}], "expected": str(2 * i)}
            )
            + "\n"
            for i in range(70)
        )
    )
    suite = tmp_path / "qa.toml"
    suite.write_text(f'name = "qa"\n[[trace]]\npath = "{trace}"\nvalidator = "exact"\n')
    assert kvgate("freeze", suite, "-o", tmp_path / "qa.parquet").exit_code == 0
    (tmp_path / "p.toml").write_text('critical = ["task=trace"]\n')  # 70 cases ≥ 59: the pre-run check passes
    matrix = write_matrix(tmp_path / "m.toml", extra="[faults.full]\nwrong_answer_rate = 0.5\n")
    runs = tmp_path / "runs"
    result = kvgate(
        "run", "--engine", "fake", "-w", tmp_path / "qa.parquet", "-m", matrix,
        "--policy", tmp_path / "p.toml", "-o", runs, "--executor", "ray", "--quiet",
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert (
        "critical slice 'task=trace': the control passed " in result.output
        and "of its 70 cases" in result.output
    )
    assert {(r["arm"], r["replicate"]) for r in stored_rows(only_run(runs))} == {("full", 0)}
