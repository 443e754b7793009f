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
    assert 0 < rows.kept.rows.size < rows.part.size  # texts kept for some rows, not all


def test_kept_texts_are_the_parts_texts(fixed_run: Path) -> None:
    """Every row's texts are the same whether the read kept them or they are read from the part later."""
    manifest = read_manifest(fixed_run)
    cases = read_cases(manifest)
    kept = RunRows(fixed_run, cases, list(manifest["arms"]), texts_for=manifest["matrix"]["control"])
    plain = RunRows(fixed_run, cases, list(manifest["arms"]))
    assert plain.kept.rows.size == 0
    every = np.arange(kept.part.size, dtype=np.int64)
    assert kept.texts(every, TEXT) == plain.texts(every, TEXT)
    failed = kept.kept.rows[~kept.passed[kept.kept.rows]]
    assert np.array_equal(failed, np.flatnonzero(~kept.passed))  # every row that did not pass is kept
    assert kept.texts(np.array([-1]), TEXT) == {c: [None] for c in TEXT}
