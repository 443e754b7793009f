"""Compaction: each arm pass ends as one merged part, read exactly as the small parts it replaced; a crash
between writing the merged part and deleting the small ones loses and repeats nothing, and the next open
cleans up (the report refuses the unlisted merged part until then); a resumed run numbers its parts
after the merged ones; a merge that cannot be written changes nothing."""

from __future__ import annotations

import errno
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from runner_support import KEY, Invoke, only_run, stored_rows, write_matrix

import kvgate.rundir.store as store
import kvgate.runner.run as run_module
from kvgate.rundir.part_index import binding, stored_run_id

MATRIX = """
[matrix]
control = "full"
candidates = ["fp8-e4m3"]
aa_replicate = true
confirm_reruns = 1
[faults.fp8-e4m3]
wrong_answer_rate = 0.3
"""
RANGE = re.compile(r"^part-(\d{5})-(\d{5})\.parquet$")
TIMESTAMP = re.compile(r'^\s*"[a-z_]*(?:_at|timestamp)": "[^"]*",?\n', re.MULTILINE)


@pytest.fixture(autouse=True)
def part_per_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """A part for every case (batch size 1), as a slow real engine stores them."""
    monkeypatch.setattr(run_module, "PART_SECONDS", 0.0)


@pytest.fixture
def spec(smoke_workload: Path, tmp_path: Path) -> list[Any]:
    matrix = write_matrix(tmp_path / "m.toml", MATRIX)
    return ["run", "--engine", "fake", "-w", smoke_workload, "-m", matrix, "--quiet"]


@pytest.fixture
def uncompacted(kvgate: Invoke, spec: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The run with compaction switched off: one part per case."""
    with monkeypatch.context() as patch:
        patch.setattr(run_module, "compact", lambda run_dir, arm: None)
        assert kvgate(*spec, "-o", tmp_path / "uncompacted").exit_code == 1
    return only_run(tmp_path / "uncompacted")


def _names(arm_dir: Path) -> list[str]:
    return sorted(p.name for p in arm_dir.glob("part-*.parquet"))


def _passes(part: Path) -> set[tuple[int, int]]:
    table = pq.read_table(part, columns=["replicate", "attempt"]).to_pylist()
    return {(r["replicate"], r["attempt"]) for r in table}


def _exact_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Every row the store reads, timing included (a regenerated row would differ there), in key order."""
    return sorted(store.read_results(run_dir).to_pylist(), key=lambda r: tuple(r[k] for k in KEY))


def _report(kvgate: Invoke, run_dir: Path) -> str:
    result = kvgate("report", run_dir, "--format", "json")
    assert result.exit_code == 1, result.stderr
    return TIMESTAMP.sub("", result.stdout)


def _merge_by_hand(arm_dir: Path) -> tuple[Path, list[Path]]:
    """What a crash after the merged part is written and before the index lists it leaves."""
    small = sorted(arm_dir.glob("part-*.parquet"))
    merged = arm_dir / f"part-{0:05d}-{len(small) - 1:05d}.parquet"
    table = pa.concat_tables([pq.read_table(p) for p in small])
    bound = table.replace_schema_metadata(binding(stored_run_id(arm_dir.parent.parent), arm_dir.name))
    pq.write_table(bound, merged, write_page_checksum=True)
    return merged, small


def test_a_run_leaves_one_part_per_arm_pass(
    kvgate: Invoke, spec: list[Any], uncompacted: Path, tmp_path: Path
) -> None:
    assert len(store.part_paths(uncompacted)) > 24 * 3  # a part per case of every pass
    assert kvgate(*spec, "-o", tmp_path / "runs").exit_code == 1
    run_dir = only_run(tmp_path / "runs")
    full, fp8 = run_dir / "results" / "full", run_dir / "results" / "fp8-e4m3"
    assert [_passes(p) for p in sorted(full.iterdir())] == [{(0, 0)}, {(1, 0)}]
    assert [_passes(p) for p in sorted(fp8.iterdir())] == [{(0, 0)}, {(0, 1)}]
    for arm_dir in (full, fp8):  # ranges in order, numbered on from the range before
        first, second = (RANGE.match(name) for name in _names(arm_dir))
        assert first and second and first[1] == "00000"
        assert int(second[1]) == int(first[2]) + 1 and int(second[2]) > int(second[1])
    assert stored_rows(run_dir) == stored_rows(uncompacted)


def test_merged_rows_keep_the_order_of_the_parts(tmp_path: Path) -> None:
    rows = [_row(f"c{i}") for i in range(7)]
    for start, end in ((0, 3), (3, 4), (4, 7)):
        store.write_part(tmp_path, "full", rows[start:end])
    in_order = store.read_results(tmp_path).to_pylist()
    assert store.compact(tmp_path, "full") == tmp_path / "results" / "full" / "part-00000-00002.parquet"
    assert _names(tmp_path / "results" / "full") == ["part-00000-00002.parquet"]
    assert store.read_results(tmp_path).to_pylist() == in_order
    assert store.write_part(tmp_path, "full", [_row("c7")]).name == "part-00003.parquet"
    assert store.compact(tmp_path, "full") is None  # one small part waits: nothing to merge


def test_report_reads_a_compacted_run_as_the_uncompacted_one(
    kvgate: Invoke, uncompacted: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(uncompacted, run_dir)
    for arm in ("full", "fp8-e4m3"):
        assert store.compact(run_dir, arm) is not None
    assert len(store.part_paths(run_dir)) == 2
    assert _exact_rows(run_dir) == _exact_rows(uncompacted)
    assert _report(kvgate, run_dir) == _report(kvgate, uncompacted)


def test_crash_before_deleting_the_merged_parts_reads_each_row_once_and_is_cleaned_on_open(
    kvgate: Invoke, uncompacted: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "crashed"
    shutil.copytree(uncompacted, run_dir)
    merged, small = _merge_by_hand(run_dir / "results" / "fp8-e4m3")
    assert all(p.exists() for p in small)
    assert _exact_rows(run_dir) == _exact_rows(uncompacted)  # each row once, not twice
    assert len(store.stored_keys(run_dir)) == len(_exact_rows(uncompacted))  # no "repeats a stored row"
    refused = kvgate("report", run_dir)  # unlisted: the report cannot tell it from a part added by hand
    assert refused.exit_code == 2 and f"result part {merged} is not in" in refused.stderr
    assert refused.stderr.count("\n") == 1

    assert kvgate("run", "--resume", run_dir, "--quiet").exit_code == 1  # verifies and lists it
    assert not any(p.exists() for p in small)
    assert _names(merged.parent) == [merged.name]
    assert _exact_rows(run_dir) == _exact_rows(uncompacted)  # nothing regenerated
    assert _report(kvgate, run_dir) == _report(kvgate, uncompacted)


def test_resume_after_compaction_numbers_parts_after_the_merged_ones(
    kvgate: Invoke, smoke_workload: Path, uncompacted: Path, tmp_path: Path
) -> None:
    crashing = write_matrix(tmp_path / "crash.toml", MATRIX + "[faults.full]\ncrash_after = 10\n")
    runs = tmp_path / "crash"
    first = kvgate("run", "--engine", "fake", "-w", smoke_workload, "-m", crashing, "-o", runs, "--quiet")
    assert first.exit_code == 4
    run_dir = only_run(runs)
    full = run_dir / "results" / "full"
    assert _names(full) == [f"part-{i:05d}.parquet" for i in range(10)]  # a failed pass is not merged
    counts = [len(store.stored_keys(run_dir))]
    for _ in range(2):
        assert kvgate("run", "--resume", run_dir, "--quiet").exit_code == 4
        counts.append(len(store.stored_keys(run_dir)))
    assert counts == [10, 20, 34]  # 10 new rows per engine session, none stored twice
    # The control's pass ended in the third session (merged); the A/A replicate's 10 parts follow it.
    assert _names(full) == ["part-00000-00023.parquet"] + [f"part-{i:05d}.parquet" for i in range(24, 34)]
    codes = [kvgate("run", "--resume", run_dir, "--quiet").exit_code for _ in range(2)]
    assert codes == [4, 1]
    # Each later session merges what the one before left at its first pass end: a part per session.
    merged = ["part-00000-00023.parquet", "part-00024-00033.parquet", "part-00034-00043.parquet"]
    assert _names(full) == [*merged, "part-00044-00047.parquet"]
    assert stored_rows(run_dir) == stored_rows(uncompacted)


def test_a_merge_that_cannot_be_written_changes_nothing(
    kvgate: Invoke, spec: list[Any], uncompacted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = store.atomic_write

    def full_for_merges(path: Path, fill: Callable[[Any], None]) -> None:
        def half_then_full(f: Any) -> None:
            f.write(b"PAR1 half a part")
            raise OSError(errno.ENOSPC, "No space left on device")

        real(path, half_then_full if RANGE.match(path.name) else fill)

    with monkeypatch.context() as patch:
        patch.setattr(store, "atomic_write", full_for_merges)
        result = kvgate(*spec, "-o", tmp_path / "runs")
    assert result.exit_code == 1, result.stderr  # the run itself succeeds
    run_dir = only_run(tmp_path / "runs")
    assert len(store.part_paths(run_dir)) == len(store.part_paths(uncompacted))
    assert not list(run_dir.glob("**/.*.tmp")) and not list(run_dir.glob("results/*/part-*-*"))
    assert stored_rows(run_dir) == stored_rows(uncompacted)

    assert kvgate("run", "--resume", run_dir, "--quiet").exit_code == 1  # with space again: merged now
    assert [len(_names(d)) for d in sorted((run_dir / "results").iterdir()) if d.is_dir()] == [1, 1]
    assert stored_rows(run_dir) == stored_rows(uncompacted)


def _row(case_id: str) -> dict[str, Any]:
    return {
        "case_id": case_id,
        "arm": "full",
        "replicate": 0,
        "attempt": 0,
        "output_text": f"answer {case_id}",
        "output_token_ids": [1, 2],
        "passed": True,
        "n_prompt_tokens": 10,
    }
