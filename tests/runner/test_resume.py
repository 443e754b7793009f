"""`kvgate run --resume RUN_DIR`: continues from the manifest's inputs, and refuses (exit 2, naming
what changed, writing nothing) when the workload, model, engine, an arm, the policy or the case
selection differs."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
from runner_support import DATA, Invoke, only_run, stored_rows, write_matrix

import kvgate.shipped as shipped_data
from kvgate.rundir.lock import run_lock

MATRIX = """
[matrix]
control = "full"
candidates = ["streaming-50", "fp8-e4m3"]
aa_replicate = true
[faults.fp8-e4m3]
wrong_answer_rate = 0.5
"""


@pytest.fixture
def finished(kvgate: Invoke, smoke_workload: Path, tmp_path: Path) -> Path:
    matrix = write_matrix(tmp_path / "m.toml", MATRIX)
    result = kvgate(
        "run", "--engine", "fake", "-w", smoke_workload, "-m", matrix, "-o", tmp_path / "runs", "--quiet"
    )
    assert result.exit_code in (1, 3), result.stderr
    return only_run(tmp_path / "runs")


def _snapshot(run_dir: Path) -> dict[str, str]:
    return {
        str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def _changed_matrix(tmp_path: Path, old: str, new: str) -> Path:
    return write_matrix(tmp_path / "changed.toml", MATRIX.replace(old, new))


def _other_workload(kvgate: Invoke, tmp_path: Path) -> Path:
    path = tmp_path / "other.parquet"
    assert kvgate("freeze", DATA / "accept.toml", "-o", path, "--limit", 24).exit_code == 0
    return path


def _local_model(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


CHANGES: list[tuple[str, Any, str]] = [
    ("workload", lambda kv, tmp: ["-w", _other_workload(kv, tmp)], "workload sha256 ("),
    ("engine", lambda kv, tmp: ["--engine", "hf"], "engine (engine: fake → hf)"),
    ("model", lambda kv, tmp: ["--model", _local_model(tmp)], "model (name: smollm2-135m →"),
    ("arm", lambda kv, tmp: ["-m", _changed_matrix(tmp, "0.5", "0.6")], "arm 'fp8-e4m3' (faults:"),
    (
        "treatment",
        lambda kv, tmp: [
            "-m",
            _changed_matrix(
                tmp, "[faults", '[treatment.streaming-50]\nkind = "eviction"\nratio = 0.6\n[faults'
            ),
        ],
        "arm 'streaming-50' (fingerprint:",
    ),
    (
        "A/A",
        lambda kv, tmp: ["-m", _changed_matrix(tmp, "aa_replicate = true", "aa_replicate = false")],
        "matrix (aa_replicate",
    ),
    ("limit", lambda kv, tmp: ["--limit", 12], "case selection ("),
    ("engine options", lambda kv, tmp: ["-E", "device=cpu"], "engine options (-E)"),
]


@pytest.mark.parametrize(("what", "given", "named"), CHANGES, ids=[c[0] for c in CHANGES])
def test_resume_refuses_a_change(
    kvgate: Invoke, finished: Path, tmp_path: Path, what: str, given: Any, named: str
) -> None:
    before = _snapshot(finished)
    result = kvgate("run", "--resume", finished, *given(kvgate, tmp_path))
    assert result.exit_code == 2, result.output
    assert f"cannot resume {finished}: changed since it started: " in result.stderr
    assert named in result.stderr
    assert result.stderr.count("\n") == 1
    assert _snapshot(finished) == before


def test_resume_refuses_a_changed_policy(kvgate: Invoke, finished: Path, tmp_path: Path) -> None:
    policy = tmp_path / "strict.toml"
    policy.write_text("tau = 0.01\n")
    result = kvgate("run", "--resume", finished, "--policy", policy)
    assert result.exit_code == 2
    assert "changed since it started: policy (tau: 0.05 → 0.01)" in result.stderr


def test_resume_refuses_a_workload_refrozen_in_place(
    kvgate: Invoke, smoke_workload: Path, tmp_path: Path
) -> None:
    workload = tmp_path / "w.parquet"
    workload.write_bytes(smoke_workload.read_bytes())
    matrix = write_matrix(tmp_path / "m.toml", MATRIX)
    assert (
        kvgate(
            "run", "--engine", "fake", "-w", workload, "-m", matrix, "-o", tmp_path / "runs", "--quiet"
        ).exit_code
        == 1
    )
    assert kvgate("freeze", DATA / "accept.toml", "-o", workload, "--limit", 24).exit_code == 0
    result = kvgate("run", "--resume", only_run(tmp_path / "runs"))
    assert result.exit_code == 2
    assert "changed since it started: workload sha256 (" in result.stderr


def test_resume_of_a_finished_run_generates_nothing(kvgate: Invoke, finished: Path) -> None:
    before = _snapshot(finished)
    again = kvgate("run", "--resume", finished, "--json")
    assert again.exit_code == 1
    assert _snapshot(finished) == before
    assert len(stored_rows(finished)) == 4 * 24


def test_resume_needs_a_run_directory(kvgate: Invoke, tmp_path: Path) -> None:
    result = kvgate("run", "--resume", tmp_path)
    assert result.exit_code == 2
    assert f"{tmp_path} is not a kvgate run: no manifest.json" in result.stderr


def test_a_run_in_use_is_refused(kvgate: Invoke, finished: Path) -> None:
    with run_lock(finished):
        result = kvgate("run", "--resume", finished)
    assert result.exit_code == 2
    assert f"run {finished} is in use by another kvgate process" in result.stderr


def _catalog_copy(tmp_path: Path, old: str, new: str) -> Path:
    shipped = tmp_path / "treatments"
    shutil.copytree(shipped_data.treatments_dir(), shipped)
    catalog = shipped / "catalog.toml"
    text = catalog.read_text()
    assert old in text
    catalog.write_text(text.replace(old, new, 1))
    return shipped


def test_resume_refuses_a_changed_catalog_treatment(
    kvgate: Invoke, finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The matrix names streaming-50 from the shipped catalog; the catalog changed after the crash.
    changed = _catalog_copy(tmp_path, "ratio = 0.5", "ratio = 0.6")
    monkeypatch.setattr(shipped_data, "treatments_dir", lambda: changed)
    result = kvgate("run", "--resume", finished)
    assert result.exit_code == 2
    assert "changed since it started: arm 'streaming-50' (fingerprint: " in result.stderr


def test_resume_refuses_a_treatment_gone_from_the_catalog(
    kvgate: Invoke, finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = _catalog_copy(tmp_path, "[treatment.streaming-50]", "[treatment.streaming-fifty]")
    monkeypatch.setattr(shipped_data, "treatments_dir", lambda: gone)
    result = kvgate("run", "--resume", finished)
    assert result.exit_code == 2
    assert (
        "the matrix in" in result.stderr
        and "no longer resolves: unknown treatment 'streaming-50'" in result.stderr
    )


def test_a_run_stopped_before_its_manifest_says_how_to_go_on(kvgate: Invoke, tmp_path: Path) -> None:
    """Killed after taking its lock and before writing its manifest: nothing was generated, and the
    message says to run the same command again (it reaches the same run directory)."""
    run_dir = tmp_path / "runs" / "0123456789ab"
    run_dir.mkdir(parents=True)
    (run_dir / ".lock").write_text("")
    result = kvgate("run", "--resume", run_dir)
    assert result.exit_code == 2
    assert "the run was stopped before it began, so nothing was generated" in result.output
    assert "start it again with the same `kvgate run` command" in result.output
