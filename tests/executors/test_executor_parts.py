"""The executors' parts without a cluster: work units, engine resources, the hardware record and the
pairing rule, and what `kvgate run` refuses before anything starts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.cli import kvgate
from ray_support import only_run, write_matrix

from kvgate.engines.resources import Resources, engine_resources
from kvgate.errors import BadInput
from kvgate.executors.ray_cluster import import_ray
from kvgate.executors.units import WorkUnit, plan_units
from kvgate.rundir.hardware import check_pairing, record_unit
from kvgate.runner.passes import ArmRun
from kvgate.treatments.matrix import resolve_matrix
from kvgate.workload.schema import read_workload


def _cases(workload: Path, n: int) -> tuple:
    return read_workload(workload).cases[:n]


def test_units_cover_each_missing_case_once_in_whole_batches(smoke_workload: Path) -> None:
    cases = _cases(smoke_workload, 20)
    matrix = resolve_matrix("default")
    run = ArmRun(matrix.candidates[0], 0, 0, cases)
    done = {(run.arm, 0, c.case_id, 0) for c in cases[:3]}
    units = plan_units(run, done, batch_size=2, workers=2)
    ids = [c.case_id for u in units for b in u.batches for c in b]
    assert sorted(ids) == sorted(c.case_id for c in cases[3:])  # the missing ones, each once
    # about four units per worker: 17 cases / 8 → 3, rounded up to whole batches of 2; the missing
    # cases are packed into full batches (ordered by prompt length), the odd one last
    assert [sum(map(len, u.batches)) for u in units] == [4, 4, 4, 4, 1]
    assert all(len(b) <= 2 for u in units for b in u.batches)
    lost = units[0]
    after = lost.again({*done, lost.key(lost.batches[0][0].case_id)}, 2)
    assert after is not None and after.tries == 1 and len(after.missing) == len(lost.missing) - 1
    assert lost.again({lost.key(c) for c in lost.missing}, 2) is None


def test_a_reuse_pass_is_one_unit_that_replays_its_history(smoke_workload: Path) -> None:
    cases = _cases(smoke_workload, 12)
    reuse = resolve_matrix("reuse").candidates[0]
    run = ArmRun(reuse, 0, 0, cases)
    done = {(run.arm, 0, c.case_id, 0) for c in cases[:6]}
    (unit,) = plan_units(run, done, batch_size=4, workers=4)
    assert [c.case_id for b in unit.batches for c in b] == [c.case_id for c in cases]  # replayed
    assert unit.missing == {c.case_id for c in cases[6:]}
    assert isinstance(unit, WorkUnit)


def test_engine_resources() -> None:
    assert engine_resources("fake", {}) == Resources(1.0, 0.0)
    assert engine_resources("hf", {"threads": 4}) == Resources(4.0, 0.0)
    assert engine_resources("hf", {"device": "cuda:0"}) == Resources(1.0, 1.0)
    assert engine_resources("vllm", {"tensor_parallel_size": 2}) == Resources(1.0, 2.0)
    assert engine_resources("vllm", {"distributed_executor_backend": "ray"}) == Resources(1.0, 0.0)
    assert engine_resources("vllm", {"threads": 2}, gpus_available=False) == Resources(2.0, 0.0)


def test_arms_on_different_hardware_are_not_paired() -> None:
    manifest: dict = {"matrix": {"control": "full"}}
    a100 = {"accelerator": "NVIDIA A100", "engine_build": "0" * 16, "node": "n1"}
    h100 = {"accelerator": "NVIDIA H100", "engine_build": "0" * 16, "node": "n2"}
    assert record_unit(manifest, "full", a100) and not record_unit(manifest, "full", a100)
    assert record_unit(manifest, "fp8", a100)
    check_pairing(manifest, "m")
    assert manifest["hardware"]["full"][0]["units"] == 2
    record_unit(manifest, "fp8", h100)
    with pytest.raises(BadInput, match=r"arm 'fp8' ran on NVIDIA A100 .* \+ NVIDIA H100 .*not paired"):
        check_pairing(manifest, "m")


def test_report_and_resume_refuse_a_run_whose_arms_ran_on_different_hardware(
    smoke_workload: Path, tmp_path: Path
) -> None:
    matrix = write_matrix(tmp_path / "m.toml")
    runs = tmp_path / "runs"
    assert (
        kvgate("run", "--engine", "fake", "-w", smoke_workload, "-m", matrix, "-o", runs, "--quiet").exit_code
        == 1
    )
    run_dir = only_run(runs)
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest["executor"] == {"kind": "local"}
    assert manifest["hardware"]["full"][0]["units"] == 0  # a local pass is not split into units
    manifest["hardware"]["fp8-e4m3"][0]["accelerator"] = "NVIDIA H100 80GB HBM3"
    path.write_text(json.dumps(manifest))
    for result in (kvgate("report", run_dir), kvgate("run", "--resume", run_dir)):
        assert result.exit_code == 2
        assert "arm 'fp8-e4m3' ran on NVIDIA H100 80GB HBM3" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_run_refuses_ray_options_it_cannot_honour(smoke_workload: Path, tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text("sequential = true\nlook_every = 8\n")
    common = ["run", "--engine", "fake", "-w", smoke_workload, "-o", tmp_path / "runs"]
    sequential = kvgate(*common, "--policy", policy, "--executor", "ray", "--policy-unsafe-reason", "test")
    assert sequential.exit_code == 2
    assert "sequential policy" in sequential.stderr and "leave out --executor" in sequential.stderr
    address = kvgate(*common, "--ray-address", "127.0.0.1:6379")
    assert address.exit_code == 2 and "need --executor ray" in address.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_without_ray_installed_the_ray_executor_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(BadInput, match=r"pip install 'kvgate\[ray\]'"):
        import_ray()


def test_the_local_executor_imports_nothing_of_ray(smoke_workload: Path, tmp_path: Path) -> None:
    code = (
        "import sys; from kvgate.cli import main; sys.argv = ['kvgate', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "assert not [m for m in sys.modules if m == 'ray' or m.startswith('ray.')], 'ray imported'\n"
    )
    import subprocess

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "run",
            "--engine",
            "fake",
            "-w",
            str(smoke_workload),
            "-o",
            str(tmp_path),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_an_address_nothing_answers_at_is_refused_at_once(smoke_workload: Path, tmp_path: Path) -> None:
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    result = kvgate(
        "run", "--engine", "fake", "-w", smoke_workload, "-o", tmp_path / "runs",
        "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
    )  # fmt: skip
    assert result.exit_code == 2
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}: Connection refused" in result.stderr


class _StubActor:
    """An actor handle whose calls answer nothing (the test sets each worker's start answer)."""

    def __getattr__(self, method: str) -> _StubActor:
        return self

    def remote(self, *args: object) -> None:
        return None


class _StubRay:
    """Just enough of `ray` for the worker pool: actor classes, `get` of an answer, `kill`."""

    class exceptions:
        class RayError(Exception):
            pass

        class RayTaskError(RayError):
            cause: Exception

    def __init__(self) -> None:
        self.killed: list[object] = []

    def remote(self, *args: object) -> object:  # ray.remote(cls), then the class's .remote(*spec)
        return self if len(args) == 1 and isinstance(args[0], type) else _StubActor()

    def options(self, **resources: float) -> _StubRay:
        return self

    def get(self, ref: dict) -> dict:
        return ref

    def kill(self, actor: object, no_restart: bool = True) -> None:
        self.killed.append(actor)


def test_the_pool_lets_go_of_workers_on_another_hardware_kind() -> None:
    from kvgate.executors.ray_pool import WorkerPool

    def machine(accelerator: str) -> dict:
        return {"accelerator": accelerator, "engine_build": "0" * 16, "node": "n", "fingerprint": {"e": 1}}

    stub = _StubRay()
    pool = WorkerPool(stub, "fake", None, {}, Resources())  # type: ignore[arg-type]
    first, other, same = (pool.spawn() for _ in range(3))
    for worker, accelerator in ((first, "NVIDIA H100"), (other, "NVIDIA A100"), (same, "NVIDIA H100")):
        worker.start_ref = machine(accelerator)
    assert pool.started(first) and not pool.started(other) and pool.started(same)
    assert pool.usable() == [first, same] and stub.killed == [other.actor]
    pool.pin(("NVIDIA A100", "0" * 16), {"e": 1})  # a resumed run whose rows are on A100s
    assert pool.usable() == []
    with pytest.raises(
        BadInput, match=r"no Ray worker runs on the run's hardware \(NVIDIA A100 .*found only"
    ):
        pool.check_alive()


def test_a_sequential_policy_is_refused_by_what_the_executor_is_not_its_name(
    smoke_workload: Path, tmp_path: Path
) -> None:
    """`joins_cluster` decides, as the executors table records it: a planted executor of any name that
    runs on a cluster's workers is refused before it is asked for an engine."""
    from kvgate.runner.job import RunOptions, run_job

    class ClusterExecutor:
        name = "elsewhere"
        joins_cluster = True

        def create_engine(self, *args: object) -> None:
            raise AssertionError("refused before any engine")

    policy = tmp_path / "p.toml"
    policy.write_text("sequential = true\nlook_every = 8\n")
    opts = RunOptions(
        workload=smoke_workload, engine="fake", policy=policy, runs_dir=tmp_path / "runs",
        policy_unsafe_reason="test",
    )  # fmt: skip
    with pytest.raises(BadInput, match=r"executor 'elsewhere' \(on a cluster's workers\) cannot"):
        run_job(opts, ClusterExecutor())  # type: ignore[arg-type]
    assert not (tmp_path / "runs").exists()
