"""The store under damage: corrupt, truncated and duplicated parts are named (exit 2); a full disk fails
cleanly (exit 4) without touching earlier parts, and a later resume completes; leftover temp files from a
crash do not break a resume; an engine crash keeps the rows stored so far."""

from __future__ import annotations

import errno
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from runner_support import KEY, Invoke, only_run, part_sizes, stored_rows, write_matrix

import kvgate.rundir.store as store

MATRIX = """
[matrix]
control = "full"
candidates = ["fp8-e4m3", "prefix-reuse"]
aa_replicate = true
confirm_reruns = 1
[faults."*"]
latency_s = 0.01
[faults.fp8-e4m3]
wrong_answer_rate = 0.2
[faults.prefix-reuse]
stale_reuse_rate = 0.1
"""


@pytest.fixture
def spec(smoke_workload: Path, tmp_path: Path) -> list[Any]:
    matrix = write_matrix(tmp_path / "m.toml", MATRIX)
    return ["run", "--engine", "fake", "-w", smoke_workload, "-m", matrix, "--quiet"]


@pytest.fixture
def uninterrupted(kvgate: Invoke, spec: list[Any], tmp_path: Path) -> Path:
    result = kvgate(*spec, "-o", tmp_path / "uninterrupted")
    assert result.exit_code == 1, result.stderr
    return only_run(tmp_path / "uninterrupted")


def _exact_rows(paths: list[Path]) -> list[dict[str, Any]]:
    """Every row of `paths`, timing included (a regenerated row would differ there), in key order."""
    rows = [row for path in paths for row in pq.read_table(path).to_pylist()]
    return sorted(rows, key=lambda r: tuple(r[k] for k in KEY))


def _full_disk_after(parts: int, flushed: list[list[dict[str, Any]]] | None = None) -> Callable[..., None]:
    """An atomic writer that stores `parts` parts of one flush (their rows appended to `flushed`), then
    runs out of space halfway through the next; merges of parts (`part-A-B`) go through."""
    real = store.atomic_write
    flushed = [] if flushed is None else flushed

    def write(path: Path, fill: Callable[[Any], None]) -> None:
        merge = re.fullmatch(r"part-\d+-\d+\.parquet", path.name) is not None
        if merge or len(flushed) < parts:
            real(path, fill)
            if not merge:
                flushed.append(_exact_rows([path]))
            return

        def half_then_full(f: Any) -> None:
            f.write(b"PAR1 half a part")
            raise OSError(errno.ENOSPC, "No space left on device")

        real(path, half_then_full)

    return write


def _run_line_then_one_error(stderr: str, run_dir: Path) -> tuple[str, str]:
    """A --quiet run's stderr split into the line naming `run_dir` (which --quiet keeps) and its one-line
    error; fails on anything else."""
    lines = stderr.splitlines()
    assert len(lines) == 2 and stderr.endswith("\n"), stderr
    assert lines[0] == f"kvgate: run {run_dir} (after an interruption: kvgate run --resume {run_dir})"
    return lines[0], lines[1]


def test_full_disk_fails_cleanly_and_resume_completes(
    kvgate: Invoke, spec: list[Any], uninterrupted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "full"
    flushed: list[list[dict[str, Any]]] = []
    with monkeypatch.context() as patch:
        patch.setattr(store, "atomic_write", _full_disk_after(3, flushed))
        result = kvgate(*spec, "-o", runs)
    assert result.exit_code == 4
    run_dir = only_run(runs)
    _, error = _run_line_then_one_error(result.stderr, run_dir)
    assert "the disk is full" in error and "--resume" in error
    before = _exact_rows(store.part_paths(run_dir))
    assert len(flushed) == 3
    assert before == sorted((r for rows in flushed for r in rows), key=lambda r: tuple(r[k] for k in KEY))
    assert not list(run_dir.glob("**/.*.tmp"))

    resumed = kvgate("run", "--resume", run_dir, "--quiet")
    assert resumed.exit_code == 1, resumed.stderr
    after = _exact_rows(store.part_paths(run_dir))
    assert all(row in after for row in before)  # the earlier rows kept as stored, not generated again
    assert stored_rows(run_dir) == stored_rows(uninterrupted)


def _page_middles(part: Path, columns: list[str]) -> list[int]:
    """The middle byte of each of `columns`' pages in the first row group (not the footer)."""
    group = pq.ParquetFile(part).metadata.row_group(0)
    chunks = [group.column(i) for i in range(group.num_columns) if group.column(i).path_in_schema in columns]
    starts = [min(c.dictionary_page_offset or c.data_page_offset, c.data_page_offset) for c in chunks]
    return [start + c.total_compressed_size // 2 for start, c in zip(starts, chunks, strict=True)]


def test_corrupt_part_is_named(kvgate: Invoke, uninterrupted: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(uninterrupted, run_dir)
    part = sorted(run_dir.glob("results/fp8-e4m3/part-*.parquet"))[0]
    data = bytearray(part.read_bytes())
    for at in _page_middles(part, ["case_id", "mean_logprob", "n_prompt_tokens"]):  # columns both read
        data[at] ^= 0xFF
    part.write_bytes(bytes(data))
    for args in (["run", "--resume", run_dir], ["report", run_dir]):
        result = kvgate(*args)
        assert result.exit_code == 2, (args, result.output)
        assert f"result part {part} is corrupt" in result.stderr
        assert result.stderr.count("\n") == 1


def test_truncated_part_is_named(kvgate: Invoke, uninterrupted: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(uninterrupted, run_dir)
    part = sorted(run_dir.glob("results/full/part-*.parquet"))[-1]
    part.write_bytes(part.read_bytes()[:100])
    result = kvgate("run", "--resume", run_dir)
    assert result.exit_code == 2
    assert f"result part {part} is corrupt" in result.stderr


def test_a_part_repeating_rows_is_named(kvgate: Invoke, uninterrupted: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(uninterrupted, run_dir)
    part = sorted(run_dir.glob("results/full/part-*.parquet"))[0]
    copy = part.with_name("part-00099.parquet")
    shutil.copy(part, copy)
    result = kvgate("run", "--resume", run_dir)
    assert result.exit_code == 2
    assert f"result part {copy} repeats a stored row" in result.stderr


def test_leftover_temp_files_do_not_break_a_resume(
    kvgate: Invoke, spec: list[Any], uninterrupted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "crashed"
    with monkeypatch.context() as patch:
        patch.setattr(store, "atomic_write", _full_disk_after(2))
        assert kvgate(*spec, "-o", runs).exit_code == 4
    run_dir = only_run(runs)
    # What kill -9 in the middle of writes leaves: half-written temp parts and a temp manifest.
    leftovers = [
        run_dir / "results" / "full" / ".part-00002.parquet.k9x1.tmp",
        run_dir / "results" / "prefix-reuse" / ".part-00000.parquet.k9x2.tmp",
        run_dir / ".manifest.json.k9x3.tmp",
    ]
    for path in leftovers:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"PAR1 torn")
    resumed = kvgate("run", "--resume", run_dir, "--quiet")
    assert resumed.exit_code == 1, resumed.stderr
    assert not any(p.exists() for p in leftovers)
    assert stored_rows(run_dir) == stored_rows(uninterrupted)


def test_engine_crash_keeps_stored_rows_and_resume_completes(
    kvgate: Invoke, smoke_workload: Path, tmp_path: Path
) -> None:
    clean = write_matrix(tmp_path / "clean.toml", MATRIX)
    crashing = write_matrix(tmp_path / "crash.toml", MATRIX + "[faults.full]\ncrash_after = 10\n")
    base = ["run", "--engine", "fake", "-w", smoke_workload, "--quiet"]
    assert kvgate(*base, "-m", clean, "-o", tmp_path / "clean").exit_code == 1
    first = kvgate(*base, "-m", crashing, "-o", tmp_path / "crash")
    assert first.exit_code == 4
    run_dir = only_run(tmp_path / "crash")
    _, error = _run_line_then_one_error(first.stderr, run_dir)
    assert "failed in arm 'full'" in error and "planted engine crash" in error
    assert len(stored_rows(run_dir)) == 10  # the batches generated before the crash are kept
    codes = [kvgate("run", "--resume", run_dir, "--quiet").exit_code for _ in range(6)]
    assert codes == [4, 4, 4, 1, 1, 1]  # 10 more cases per session: the control's 24, then the A/A's
    assert stored_rows(run_dir) == stored_rows(only_run(tmp_path / "clean"))


def test_reuse_pass_resumed_midway_meets_the_same_cache(
    kvgate: Invoke, smoke_workload: Path, uninterrupted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = write_matrix(tmp_path / "slow.toml", MATRIX.replace("latency_s = 0.01", "latency_s = 0.03"))
    real = store.atomic_write

    def full_on_second_reuse_part(path: Path, fill: Callable[[Any], None]) -> None:
        if path.parent.name == "prefix-reuse" and path.name != "part-00000.parquet":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, fill)

    runs = tmp_path / "reuse"
    args = ["run", "--engine", "fake", "-w", smoke_workload, "-m", slow, "-o", runs, "--quiet"]
    with monkeypatch.context() as patch:
        patch.setattr(store, "atomic_write", full_on_second_reuse_part)
        assert kvgate(*args).exit_code == 4
    run_dir = only_run(runs)
    reuse_rows = [r for r in stored_rows(run_dir) if r["arm"] == "prefix-reuse"]
    assert 0 < len(reuse_rows) < 24
    assert kvgate("run", "--resume", run_dir, "--quiet").exit_code == 1
    rows = stored_rows(run_dir)
    assert rows == stored_rows(uninterrupted)  # cached-token counts and stale answers included
    assert sum(r["n_cached_tokens"] > 0 for r in rows if r["arm"] == "prefix-reuse") >= 23
    assert min(part_sizes(run_dir)) > 0  # the replayed batches stored no empty parts
