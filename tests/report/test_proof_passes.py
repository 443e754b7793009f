"""analysis.proof: an arm's evidence is gathered pass by pass, each (replicate, attempt) it stored once,
in that order, whatever order its rows are in."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from kvgate.report.analysis.proof import _arm_proof, _Rows


def rows(replicate: list[int], attempt: list[int]) -> _Rows:
    n = len(replicate)
    none = np.full(n, -1, dtype=np.int64)
    return _Rows(
        case_ids=pa.chunked_array([pa.array([f"c{i}" for i in range(n)])]),
        arm=np.zeros(n, dtype=np.int64),
        arm_names=["offload"],
        replicate=np.array(replicate, dtype=np.int64),
        attempt=np.array(attempt, dtype=np.int64),
        verdict=np.ones(n, dtype=bool),
        prompt=none, cached=none, kept=none, kv_bytes=none,
        dtype=none, dtype_names=[], quantized=none, written=none, read=none, spans=none,
    )  # fmt: skip


def test_each_stored_pass_once_in_order() -> None:
    proof = _arm_proof(
        rows([1, 0, 0, 1, 0, 0], [0, 2, 0, 0, 1, 2]), "offload", {"kind": "offload"}, None, None
    )
    assert proof["passes"] == 4 and proof["cases"] == 6
    labels = [m.split(":")[0] for m in proof["missing"]]
    assert labels == [
        "arm 'offload'",
        "arm 'offload' rerun 1",
        "arm 'offload' rerun 2",
        "arm 'offload' (A/A replicate 1)",
    ]
