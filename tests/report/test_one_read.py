"""`kvgate report` reads each result part once: the verdicts, the counters the isolation check and the
proof of treatment use, and the texts of the failing examples all come from that one read
(analysis.run_data.RunRows, analysis.row_texts)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kvgate.report.analysis.row_texts as row_texts
import kvgate.report.analysis.run_data as run_data
from kvgate.report.analysis.build import verified_report
from kvgate.report.analysis.evidence import TEXT
from kvgate.report.analysis.run_data import RunRows, read_cases
from kvgate.rundir.manifest import read_manifest
from kvgate.rundir.store import part_paths


def test_the_report_reads_each_part_once(fixed_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: Counter[Path] = Counter()

    def counted(reader: Any) -> Any:
        def read(path: Path, *args: Any, **kwargs: Any) -> Any:
            reads[path] += 1
            return reader(path, *args, **kwargs)

        return read

    monkeypatch.setattr(run_data, "read_part", counted(run_data.read_part))
    monkeypatch.setattr(row_texts, "read_part", counted(row_texts.read_part))
    monkeypatch.setattr("kvgate.report.analysis.proof.read_results", None)  # the proof reads RunRows.table
    report, rows = verified_report(fixed_run)
    assert reads == Counter(part_paths(fixed_run))
    examples = [f for arm in report.arms for f in arm.failures]
    assert examples and all(f.control_output is not None and f.candidate_output is not None for f in examples)
    assert 0 < rows.kept.rows.size < rows.case.size  # texts kept for some rows, not all


def test_kept_texts_are_the_parts_texts(fixed_run: Path) -> None:
    """Every row's texts are the same whether the read kept them or they are read from the part later."""
    manifest = read_manifest(fixed_run)
    cases = read_cases(manifest)
    kept = RunRows(fixed_run, cases, list(manifest["arms"]), texts_for=manifest["matrix"]["control"])
    plain = RunRows(fixed_run, cases, list(manifest["arms"]))
    assert plain.kept.rows.size == 0
    every = np.arange(kept.case.size, dtype=np.int64)
    assert kept.texts(every, TEXT) == plain.texts(every, TEXT)
    failed = kept.kept.rows[~kept.passed[kept.kept.rows]]
    assert np.array_equal(failed, np.flatnonzero(~kept.passed))  # every row that did not pass is kept
    assert kept.texts(np.array([-1]), TEXT) == {c: [None] for c in TEXT}


def test_each_rows_part_and_its_place_there(fixed_run: Path) -> None:
    """`RunRows.part_of` gives each row's part and its row in that part, as the parts were read."""
    import pyarrow.parquet as pq

    manifest = read_manifest(fixed_run)
    rows = RunRows(fixed_run, read_cases(manifest), list(manifest["arms"]))
    lengths = [pq.read_metadata(path).num_rows for path in rows.paths]
    assert len(lengths) > 2 and rows.case.size == sum(lengths)
    part, offset = rows.part_of(np.arange(sum(lengths), dtype=np.int64))
    assert part.tolist() == [i for i, n in enumerate(lengths) for _ in range(n)]
    assert offset.tolist() == [j for n in lengths for j in range(n)]


def test_arm_rows_are_each_cases_first_attempt(fixed_run: Path) -> None:
    """Every ArmRows array holds each case's first attempt (the fill where it has none), whether it is an
    array of its own or, one value for every case, a read-only shared element."""
    manifest = read_manifest(fixed_run)
    rows = RunRows(fixed_run, read_cases(manifest), list(manifest["arms"]))
    shared = 0
    for arm in manifest["arms"]:
        got = rows.arm_rows(arm)
        mine = np.flatnonzero(rows._of(arm) & (rows.replicate == 0) & (rows.attempt == 0))
        at = dict(zip(rows.case[mine].tolist(), mine.tolist(), strict=True))
        for name, values, fill in [
            ("passed", rows.passed, False),
            ("error", rows.error, False),
            ("mean_logprob", rows.mean_logprob, np.nan),
            ("first_divergence", rows.first_divergence, -1),
            ("n_prompt_tokens", rows.n_prompt_tokens, -1),
            *((f"certificate {c}", rows.certificate[c], np.nan) for c in rows.certificate),
        ]:
            array = got.certificate[name.split()[1]] if name.startswith("certificate") else getattr(got, name)
            want = np.array([values[at[c]] if c in at else fill for c in range(rows.n)], dtype=values.dtype)
            assert np.array_equal(array, want, equal_nan=want.dtype.kind == "f"), (arm, name)
            if array.strides == (0,):
                shared += 1
                assert not array.flags.writeable
        assert got.present.tolist() == [c in at for c in range(rows.n)]
    assert shared  # the fixed run's certificate scores are null throughout


def test_the_parts_read_are_the_ones_verified(fixed_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify_run hands the reader the live parts it found listed (the folder is not listed again)."""
    from kvgate.rundir.integrity import verify_run

    manifest = read_manifest(fixed_run)
    check = verify_run(fixed_run, manifest, parts=False)
    assert check.live is not None and list(check.live) == part_paths(fixed_run)
    monkeypatch.setattr(run_data, "part_paths", None)  # listing again would fail
    rows = RunRows(fixed_run, read_cases(manifest), list(manifest["arms"]), check)
    assert rows.paths == list(check.live)
