"""Tampered runs: every edit of a stored artefact after the run is refused by `report` with one line naming
what changed (exit 2) and no verdict; a run in progress is exit 4."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result
from helpers.report_fixed_run import POLICY, make_fixed_run

from kvgate.cli import cli
from kvgate.errors import BadInput
from kvgate.rundir.lock import run_lock
from kvgate.rundir.part_index import file_sha256, read_index, write_index
from kvgate.rundir.store import reconcile, write_part


def report(run: Path) -> Result:
    return CliRunner().invoke(cli, ["report", str(run), "--format", "json"])


@pytest.fixture(scope="module")
def passing_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another run (another policy, so another run id) in which snapkv-50 fails nothing."""
    root = tmp_path_factory.mktemp("other")
    return make_fixed_run(root, POLICY.replace("tau = 0.1", "tau = 0.11"), fails={"snapkv-50": set()})


@pytest.fixture
def run(fixed_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / fixed_run.name
    shutil.copytree(fixed_run, copy)
    return copy


def _edit_manifest(run: Path, edit: Callable[[dict], None]) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    edit(manifest)
    (run / "manifest.json").write_text(json.dumps(manifest))


def _part(run: Path, arm: str) -> Path:
    return next((run / "results" / arm).glob("part-*.parquet"))


def _relist(run: Path) -> None:
    """What a forger who also rewrites the index does: every part's sha256 recomputed."""
    results = run / "results"
    parts = {k: {**v, "sha256": file_sha256(results / k)} for k, v in read_index(results).items()}
    write_index(results, run.name, parts)


def _rewrite_workload(run: Path, column: str, values: Callable[[list], list]) -> None:
    path = Path(json.loads((run / "manifest.json").read_text())["workload_path"])
    copy = run / "workload.parquet"
    shutil.copy(path, copy)
    table = pq.read_table(copy)
    i = table.schema.get_field_index(column)
    table = table.set_column(
        i, column, pa.array(values(table[column].to_pylist()), table.schema.field(i).type)
    )
    pq.write_table(table, copy)  # the kvgate metadata (and its content hash) kept as they were
    _edit_manifest(run, lambda m: m.update(workload_path=str(copy)))


def _policy(text: str) -> Callable[[dict], None]:
    def edit(m: dict) -> None:
        m["policy_text"] = text

    return edit


def _consistent_policy(m: dict) -> None:
    m["policy_text"] = POLICY.replace("tau = 0.1", "tau = 0.9")
    m["policy_sha256"] = hashlib.sha256(m["policy_text"].encode()).hexdigest()


def _drop_arm(m: dict) -> None:
    m["matrix"]["candidates"].remove("snapkv-50")
    m["arms"].pop("snapkv-50")


def _other_runs_part(other: Path, relist: bool) -> Callable[[Path], None]:
    def tamper(run: Path) -> None:
        shutil.copy(_part(other, "snapkv-50"), _part(run, "snapkv-50"))
        if relist:
            _relist(run)

    return tamper


def _edit_rows(run: Path) -> None:
    part = _part(run, "snapkv-50")
    table = pq.read_table(part)
    passed = pa.array([True] * table.num_rows)
    pq.write_table(table.set_column(table.schema.get_field_index("passed"), "passed", passed), part)


def _move_arm(run: Path) -> None:
    shutil.copy(_part(run, "prefix-reuse"), _part(run, "snapkv-50"))
    _relist(run)


TAMPERING: dict[str, tuple[Callable[..., object], str]] = {
    "policy text (tau 0.9)": (
        lambda run, _: _edit_manifest(run, _policy(POLICY.replace("tau = 0.1", "tau = 0.9"))),
        "policy_text does not match policy_sha256",
    ),
    "policy text and its sha256": (
        lambda run, _: _edit_manifest(run, _consistent_policy),
        "does not match its identity fields",
    ),
    "failing arm dropped": (
        lambda run, _: _edit_manifest(run, _drop_arm),
        "does not match its identity fields",
    ),
    "candidates only": (
        lambda run, _: _edit_manifest(run, lambda m: m["matrix"]["candidates"].remove("snapkv-50")),
        "does not match its identity fields",
    ),
    "run id": (lambda run, _: _edit_manifest(run, lambda m: m.update(run_id="0" * 12)), "does not match"),
    "model": (
        lambda run, _: _edit_manifest(run, lambda m: m["model"].update(name="other")),
        "does not match its identity fields",
    ),
    "part of another run": (
        lambda run, other: _other_runs_part(other, relist=False)(run),
        "changed after it was stored",
    ),
    "part of another run, index rewritten": (
        lambda run, other: _other_runs_part(other, relist=True)(run),
        "belongs to run",
    ),
    "part of another arm, index rewritten": (lambda run, _: _move_arm(run), "belongs to arm 'prefix-reuse'"),
    "rows edited": (lambda run, _: _edit_rows(run), "changed after it was stored"),
    "part deleted": (lambda run, _: _part(run, "snapkv-50").unlink(), "is missing: it was deleted"),
    "part added": (
        lambda run, _: shutil.copy(
            _part(run, "snapkv-50"), run / "results" / "snapkv-50" / "part-00007.parquet"
        ),
        "is not in",
    ),
    "index deleted": (lambda run, _: (run / "results" / "index.json").unlink(), "but no"),
    "slice labels": (
        lambda run, _: _rewrite_workload(run, "ctx_bucket", lambda v: ["1k"] * len(v)),
        "rows do not match its content sha256",
    ),
    "critical flags": (
        lambda run, _: _rewrite_workload(run, "critical", lambda v: [False] * len(v)),
        "rows do not match its content sha256",
    ),
    "manifest of the wrong shape": (
        lambda run, _: _edit_manifest(run, lambda m: m.update(limit=0)),
        "manifest.json is malformed at limit",
    ),
}


def test_the_untampered_run_gives_its_verdict(run: Path) -> None:
    assert report(run).exit_code == 1


@pytest.mark.parametrize("name", list(TAMPERING))
def test_tampering_is_refused_with_one_line(run: Path, passing_run: Path, name: str) -> None:
    tamper, message = TAMPERING[name]
    tamper(run, passing_run)
    result = report(run)
    assert result.exit_code == 2, (name, result.output)
    assert result.stdout == ""  # no verdict
    assert message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_a_run_in_progress_is_exit_4_without_a_verdict(run: Path) -> None:
    _part(run, "fp8-e4m3").unlink()
    reconcile(run, run.name)  # the run as its writer sees it: fp8-e4m3 not stored yet
    with run_lock(run):
        result = report(run)
    assert result.exit_code == 4 and result.stdout == ""
    assert "is in progress" in result.stderr and "arm 'fp8-e4m3' has 0 of 48 rows" in result.stderr


def test_a_complete_run_whose_lock_is_held_is_reported(run: Path) -> None:
    with run_lock(run):
        assert report(run).exit_code == 1


def test_resume_refuses_a_foreign_part_and_deletes_nothing(run: Path, passing_run: Path) -> None:
    stray = run / "results" / "snapkv-50" / "part-00000-00009.parquet"  # a range part covering the real one
    shutil.copy(_part(passing_run, "snapkv-50"), stray)
    real = run / "results" / "snapkv-50" / "part-00000.parquet"
    with pytest.raises(BadInput, match="belongs to run"):
        reconcile(run, run.name)
    assert real.exists() and stray.exists()


@pytest.mark.parametrize("kind", ["symlink", "folder"])
def test_a_lock_that_is_not_a_file_is_refused(run: Path, tmp_path: Path, kind: str) -> None:
    outside = tmp_path / "outside"
    outside.write_text("")
    if kind == "symlink":
        (run / ".lock").symlink_to(outside)
    else:
        (run / ".lock").mkdir()
    with pytest.raises(BadInput, match="is not a lock file"), run_lock(run):
        pass
    result = report(run)
    assert result.exit_code == 2 and "is not a lock file" in result.stderr


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_a_part_that_is_not_a_file_is_refused_without_reading_it(run: Path, target: str) -> None:
    part = _part(run, "snapkv-50")
    part.unlink()
    if target == "fifo":
        os.mkfifo(part)
    else:
        part.symlink_to(target)
    result = report(run)
    assert result.exit_code == 2 and "is not a regular file" in result.stderr


def test_a_workload_that_is_not_a_file_is_refused(run: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.parquet"
    os.mkfifo(fifo)
    _edit_manifest(run, lambda m: m.update(workload_path=str(fifo)))
    result = report(run)
    assert result.exit_code == 2 and "is not a regular file" in result.stderr


def test_results_are_never_written_through_a_link(run: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(run / "results" / "full")
    (run / "results" / "full").symlink_to(outside)
    with pytest.raises(BadInput, match="is a link"):
        write_part(run, "full", [])
    assert list(outside.iterdir()) == []
