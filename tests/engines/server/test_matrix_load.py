"""Load settings in a matrix: `concurrency` and `kv_blocks`, for the run and per arm, bounded."""

from __future__ import annotations

import pytest

from kvgate.errors import BadInput
from kvgate.treatments.matrix import parse_matrix_text

BASE = '[matrix]\ncontrol = "full"\ncandidates = ["prefix-reuse"]\n'


def test_defaults_and_per_arm_settings() -> None:
    matrix = parse_matrix_text(
        BASE + "concurrency = 2\nkv_blocks = 40\n[arm.prefix-reuse]\nconcurrency = 8\nkv_blocks = 16\n",
        "m",
        "m.toml",
    )
    assert matrix.concurrency_for("full") == 2 and matrix.kv_blocks_for("full") == 40
    assert matrix.concurrency_for("prefix-reuse") == 8 and matrix.kv_blocks_for("prefix-reuse") == 16
    assert matrix.submit_size_for("prefix-reuse") == 8  # batches large enough to keep 8 requests in flight
    assert matrix.load_for("prefix-reuse") == {"concurrency": 8, "kv_blocks": 16}
    plain = parse_matrix_text(BASE, "m", "m.toml")
    assert plain.load_for("full") == {} and plain.kv_blocks_for("full") is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("concurrency = 0\n", "concurrency must be in [1, 1024], got 0"),
        ("concurrency = 5000\n", "concurrency must be in [1, 1024], got 5000"),
        ("kv_blocks = 0\n", "kv_blocks must be in [1, 16777216], got 0"),
        ("concurrency = 2.5\n", "concurrency must be a int, got 2.5"),
        ("[arm.prefix-reuse]\nconcurency = 2\n", "unknown key 'concurency'; did you mean 'concurrency'?"),
        ("[arm.prefix-reuse]\nkv_blocks = -3\n", "kv_blocks must be in [1, 16777216], got -3"),
    ],
)
def test_bad_load_settings_are_refused(extra: str, message: str) -> None:
    with pytest.raises(BadInput, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        parse_matrix_text(BASE + extra, "m", "m.toml")
