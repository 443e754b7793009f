"""Every number an option of freeze, run, report, simulate or init takes is bounded by its option (or
checked before any work), and the seed a workload stores is checked at read as at write: `freeze --seed
-1` was accepted and stored, and `freeze --limit 0` was refused only after the tokenizer was loaded."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers.cli import kvgate

from kvgate.seeds import MAX_SEED
from kvgate.workload.schema import META_KEY


def _refused(args: list[object], *words: str) -> None:
    result = kvgate(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("kvgate: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert all(w in result.stderr for w in words), result.stderr


@pytest.mark.parametrize(
    ("option", "value"),
    [("--seed", "-1"), ("--seed", str(MAX_SEED + 1)), ("--limit", "0"), ("--limit", "-3")],
)
def test_freeze_refuses_a_number_out_of_bounds_before_writing(
    tmp_path: Path, option: str, value: str
) -> None:
    out = tmp_path / "w.parquet"
    _refused(["freeze", "smoke", "-o", out, option, value], f"'{option}'", f"{value} is not in the range")
    assert not out.exists()


def test_simulate_bounds_its_seed_above_too() -> None:
    _refused(["simulate", "--runs", "10", "--n", "24", "--seed", str(MAX_SEED + 1)], "'--seed'")


def test_the_largest_seed_is_frozen_and_read(tmp_path: Path) -> None:
    out = tmp_path / "w.parquet"
    assert kvgate("freeze", "smoke", "-o", out, "--limit", "1", "--seed", MAX_SEED).exit_code == 0
    assert kvgate("freeze", "--check", out).exit_code == 0


@pytest.mark.parametrize(("field", "value"), [("seed", -1), ("seed", 1.5), ("limit", 0)])
def test_a_stored_seed_or_limit_out_of_bounds_is_refused_at_read(
    tmp_path: Path, smoke_workload: Path, field: str, value: object
) -> None:
    table = pq.read_table(smoke_workload)
    meta = json.loads(table.schema.metadata[META_KEY])
    meta[field] = value
    forged = tmp_path / "forged.parquet"
    pq.write_table(table.replace_schema_metadata({META_KEY: json.dumps(meta)}), forged)
    _refused(["freeze", "--check", forged], "kvgate metadata is malformed at", field)
