"""Matrix specs: control, candidates, A/A replicate, confirm-reruns, batch size per arm; unknown keys
and ill-typed values exit 2 naming them, before anything is written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from runner_support import Invoke, only_run, stored_rows, write_matrix

from kvgate.shipped import treatments_dir

BASE = '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\n'
ONE = '[matrix]\ncontrol = "full"\ncandidates = ["x"]\n[treatment.x]\n'

BAD = [
    (BASE + "confirm_rerun = 2\n", "[matrix]: unknown key 'confirm_rerun'; did you mean 'confirm_reruns'?"),
    (BASE + "[arms.fp8-e4m3]\nbatch_size = 2\n", "unknown key 'arms'; did you mean 'arm'?"),
    (
        BASE + "[arm.fp8-e4m3]\nbatchsize = 2\n",
        "[arm.fp8-e4m3]: unknown key 'batchsize'; did you mean 'batch_size'?",
    ),
    (BASE + "[arm.fp9]\nbatch_size = 2\n", "bad.toml: unknown arm in [arm] 'fp9'; known: fp8-e4m3, full"),
    (BASE + "[faults.fp8-e4m3]\nwrong_rate = 0.1\n", "[faults.fp8-e4m3]: unknown fault 'wrong_rate'"),
    (BASE + "[faults.fp8-e4m3]\nwrong_answer_rate = 2\n", "wrong_answer_rate must be in [0, 1], got 2"),
    (BASE + "[faults.full]\nsalt_leak = 1\n", "salt_leak must be true or false, got 1"),
    (BASE + 'aa_replicate = "yes"\n', "aa_replicate must be a bool, got 'yes'"),
    (BASE + "confirm_reruns = true\n", "confirm_reruns must be a int, got True"),
    (BASE + "confirm_reruns = -1\n", "confirm_reruns must be in [0, 10], got -1"),
    (BASE + "confirm_reruns = 1000000\n", "confirm_reruns must be in [0, 10], got 1000000"),
    (BASE + "batch_size = 0\n", "batch_size must be in [1, 4096], got 0"),
    (BASE + "seed = -1\n", "seed must be in [0, 4294967295], got -1"),  # llama-server: -1 is random
    (BASE + "seed = 4294967296\n", "4294967296 is beyond ±2147483648"),  # every TOML integer is bounded
    (BASE + "seed = nan\n", "nan is not a finite number"),
    ('[matrix]\ncontrol = "full"\ncandidates = "fp8-e4m3"\n', "candidates must be a list of treatment names"),
    (
        '[matrix]\ncontrol = "fp8-e4m3"\ncandidates = ["full"]\n',
        "the control 'fp8-e4m3' must be of kind 'full'",
    ),
    ('[matrix]\ncontrol = "full"\ncandidates = []\n', "the matrix has no candidates"),
    ('[matrix]\ncontrol = "full"\ncandidates = ["full"]\n', "an arm is listed twice"),
    ('[matrix]\ncandidates = ["fp8-e4m3"]\n', "[matrix]: missing key 'control'"),
    (ONE + 'kind = "eviction"\nsink_tokens = 1.5\n', "[treatment.x]: sink_tokens must be int, got 1.5"),
    (ONE + 'kind = "eviction"\nduring_decoding = "yes"\n', "during_decoding must be bool, got 'yes'"),
    (ONE + 'kind = "offload"\nblock_size = nan\n', "nan is not a finite number"),
    (ONE + 'kind = "quantize"\nengine_args = 3\n', "engine_args must be dict[str, Any], got 3"),
    (ONE.replace('"x"', '"../../up"') + 'kind = "full"\n', "treatment name '../../up' is not allowed"),
    (ONE.replace('"x"', '"/abs"') + 'kind = "full"\n', "treatment name '/abs' is not allowed"),
    (ONE.replace('"x"', '".."') + 'kind = "full"\n', "treatment name '..' is not allowed"),
    (ONE.replace('"x"', '""') + 'kind = "full"\n', "treatment name '' is not allowed"),
    (ONE.replace('"x"', '"a\\u0000b"') + 'kind = "full"\n', "is not allowed"),
]


@pytest.mark.parametrize(("body", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_matrix_exits_2_naming_it(
    kvgate: Invoke, smoke_workload: Path, tmp_path: Path, body: str, message: str
) -> None:
    matrix = write_matrix(tmp_path / "bad.toml", body)
    result = kvgate("run", "--engine", "fake", "-w", smoke_workload, "-m", matrix, "-o", tmp_path / "runs")
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "runs").exists()


def test_faults_need_the_fake_engine(kvgate: Invoke, smoke_workload: Path, tmp_path: Path) -> None:
    result = kvgate(
        "run", "--engine", "hf", "-w", smoke_workload, "-m", "faults-demo", "-o", tmp_path / "runs"
    )
    assert result.exit_code == 2
    assert "matrix 'faults-demo' plants [faults]; only --engine fake honours them" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_fake_engine_takes_only_a_timeout(kvgate: Invoke, smoke_workload: Path, tmp_path: Path) -> None:
    result = kvgate(
        "run", "--engine", "fake", "-w", smoke_workload, "-E", "device=cuda", "-o", tmp_path / "r"
    )
    assert result.exit_code == 2
    assert "unknown fake engine option 'device' (-E); known: timeout_s" in result.stderr


def test_batch_size_per_arm_reaches_the_engine(kvgate: Invoke, smoke_workload: Path, tmp_path: Path) -> None:
    # A planted crash after 10 cases: one case per call would store 10 rows; batches of 4 store 8.
    body = (
        '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3", "offload-host"]\naa_replicate = false\n'
        "[arm.offload-host]\nbatch_size = 4\n[faults.offload-host]\ncrash_after = 10\n"
    )
    matrix = write_matrix(tmp_path / "m.toml", body)
    args = ["run", "--engine", "fake", "-w", smoke_workload, "-m", matrix, "-o", tmp_path / "runs", "--quiet"]
    assert kvgate(*args).exit_code == 4
    run_dir = only_run(tmp_path / "runs")
    rows = stored_rows(run_dir)
    assert sum(r["arm"] == "fp8-e4m3" for r in rows) == 24
    assert sum(r["arm"] == "offload-host" for r in rows) == 8
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["arms"]["offload-host"]["batch_size"] == 4
    assert manifest["arms"]["fp8-e4m3"]["batch_size"] == 1


def test_confirm_reruns_class_failures(kvgate: Invoke, smoke_workload: Path, tmp_path: Path) -> None:
    body = (
        '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3", "prefix-reuse"]\nconfirm_reruns = 3\n'
        "[faults.fp8-e4m3]\nwrong_answer_rate = 0.25\n[faults.prefix-reuse]\nstale_reuse_rate = 0.25\n"
    )
    matrix = write_matrix(tmp_path / "m.toml", body)
    args = ["run", "--engine", "fake", "-w", smoke_workload, "-m", matrix, "-o", tmp_path / "runs", "--json"]
    result = kvgate(*args)
    rows = stored_rows(only_run(tmp_path / "runs"))
    for arm in ("fp8-e4m3", "prefix-reuse"):
        failed = {r["case_id"] for r in rows if r["arm"] == arm and r["attempt"] == 0 and not r["passed"]}
        assert failed
        for attempt in (1, 2, 3):
            rerun = [r for r in rows if r["arm"] == arm and r["attempt"] == attempt]
            assert {r["case_id"] for r in rerun} == failed  # only candidate-only failures, each k times
            assert not any(
                r["passed"] for r in rerun
            )  # the planted faults reproduce (reuse: history replayed)
    report = json.loads(result.stdout)
    assert {a["arm"]: a["reproducible_failures"] for a in report["arms"]} == {
        arm: len({r["case_id"] for r in rows if r["arm"] == arm and r["attempt"] == 1})
        for arm in ("fp8-e4m3", "prefix-reuse")
    }


def test_manifest_holds_the_policy_before_the_first_generation(
    kvgate: Invoke, smoke_workload: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("tau = 0.02  # declared before the run\nmin_control_passes = 10\n")
    matrix = write_matrix(
        tmp_path / "m.toml", BASE + "[faults.full]\ncrash_after = 0\n"
    )  # no generation at all
    args = [
        "run",
        "--engine",
        "fake",
        "-w",
        smoke_workload,
        "-m",
        matrix,
        "--policy",
        policy,
        "-o",
        tmp_path / "runs",
    ]
    assert kvgate(*args).exit_code == 4
    run_dir = only_run(tmp_path / "runs")
    assert stored_rows(run_dir) == []
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["policy_text"] == policy.read_text()
    assert manifest["policy_sha256"] == hashlib.sha256(policy.read_bytes()).hexdigest()
    assert manifest["arms"]["fp8-e4m3"]["fingerprint"]
    assert manifest["workload_sha256"] and manifest["engine"]["engine"] == "fake"


def test_shipped_matrices_parse_and_are_listed(kvgate: Invoke) -> None:
    result = kvgate("treatments")
    assert result.exit_code == 0, result.output
    for path in treatments_dir().glob("*.toml"):
        if path.stem not in ("catalog", "policy"):
            assert path.stem in result.stdout


def test_a_timed_out_case_fails_its_arm_as_a_timeout(
    kvgate: Invoke, smoke_workload: Path, tmp_path: Path
) -> None:
    body = '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\n[faults.fp8-e4m3]\nlatency_s = 0.05\n'
    matrix = write_matrix(tmp_path / "m.toml", body)
    args = ["run", "--engine", "fake", "-w", smoke_workload, "-m", matrix, "-E", "timeout_s=0.01"]
    result = kvgate(*args, "-o", tmp_path / "runs", "--quiet")
    assert result.exit_code == 1, result.stderr  # every candidate case timed out: 24 of 24 fail
    rows = stored_rows(only_run(tmp_path / "runs"))
    assert {r["fail_kind"] for r in rows if r["arm"] == "fp8-e4m3"} == {"timeout"}
    assert all(r["passed"] for r in rows if r["arm"] == "full")
