"""The proof of a context-scoped eviction reads each row's `question_start` from the workload: the Arrow
join gives what a lookup by case id gives, −1 for a null start or a case the workload lacks."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from kvgate.report.analysis.proof import question_starts_of


def test_the_join_matches_a_lookup_by_case_id() -> None:
    rng = np.random.default_rng(7)
    ids = [f"case-{i:05d}" for i in range(500)]
    starts = [None if i % 7 == 0 else int(rng.integers(0, 4000)) for i in range(500)]
    workload = pa.table(
        {
            "case_id": pa.chunked_array([ids[:200], ids[200:]]),
            "question_start": pa.chunked_array([starts[:200], starts[200:]], type=pa.int32()),
        }
    )
    asked = [ids[int(i)] for i in rng.integers(0, 500, 3000)] + ["not-in-the-workload"]
    case_ids = pa.chunked_array([asked[:1000], asked[1000:]])
    lookup = dict(zip(ids, starts, strict=True))
    expected = [-1 if lookup.get(c) is None else lookup[c] for c in asked]
    got = question_starts_of(case_ids, workload)
    assert got.dtype == np.int64 and got.tolist() == expected
    assert got[-1] == -1 and (got == -1).sum() == sum(1 for c in asked if lookup.get(c) is None)
