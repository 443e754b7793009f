"""rundir.part_index.plainly_valid: the one-loop check of a result index as `write_index` writes it never
accepts what INDEX_SCHEMA refuses (anything it does not accept goes to the validator, which names the
field), and accepts the indexes kvgate writes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kvgate.errors import BadInput
from kvgate.rundir.part_index import _VALIDATOR, MAX_PART_ROWS, plainly_valid, read_index, write_index

SHA = "ab" * 32


def index(n: int = 3) -> dict[str, Any]:
    parts = {f"arm-{i % 2}/part-{i:05d}.parquet": {"sha256": SHA, "rows": 1024} for i in range(n)}
    return {"run_id": "20261202T000000.000Z-abcdef012345", "parts": parts}


def mutations() -> list[dict[str, Any]]:
    """Indexes one field away from a valid one: each value of each kind, in each place."""
    values: list[Any] = [None, True, 1, 1.0, -1, 2.5, "", "x", SHA, SHA.upper(), SHA + "\n", [], {}, {"a": 1}]
    values += [MAX_PART_ROWS, MAX_PART_ROWS + 1, 10**30]  # the row count's bound, either side
    out = []
    for value in values:
        for edit in ("run_id", "parts", "extra", "key", "entry", "sha256", "rows", "entry_extra", "no_rows"):
            doc = index()
            entry = doc["parts"]["arm-0/part-00000.parquet"]
            if edit in ("run_id", "parts", "extra"):
                doc[edit] = value
            elif edit == "key" and isinstance(value, str):
                doc["parts"][value] = doc["parts"].pop("arm-0/part-00000.parquet")
            elif edit == "entry":
                doc["parts"]["arm-0/part-00000.parquet"] = value
            elif edit in ("sha256", "rows"):
                entry[edit] = value
            elif edit == "entry_extra":
                entry["more"] = value
            elif edit == "no_rows":
                del entry["rows"]
            out.append(doc)
    for key in (
        "arm/part-1.parquet",
        "arm/part-00001.parquet\n",
        "/part-00001.parquet",
        "a/b/part-00001.parquet",
        "arm/part-00001-00009.parquet",
        "arm/part-00001.parquet.tmp",
        "-arm/part-00001.parquet",
    ):
        doc = index()
        doc["parts"][key] = {"sha256": SHA, "rows": 0}
        out.append(doc)
    return [json.loads(json.dumps(d)) for d in out] + [[], None, "index", {"run_id": None}]  # as read


def test_the_plain_check_never_accepts_what_the_schema_refuses() -> None:
    accepted = 0
    for doc in mutations():
        valid = not list(_VALIDATOR.iter_errors(doc))
        if plainly_valid(doc):
            accepted += 1
            assert valid, doc
    assert accepted  # some edits keep the index valid (a run id of null, another key)


@pytest.mark.parametrize("n", [0, 1, 1000])
def test_indexes_kvgate_writes_pass_the_plain_check(tmp_path: Path, n: int) -> None:
    doc = index(n)
    write_index(tmp_path, doc["run_id"], doc["parts"])
    assert plainly_valid(json.loads((tmp_path / "index.json").read_text()))
    assert read_index(tmp_path, doc["run_id"]) == doc["parts"]


def test_a_refused_index_is_still_named_by_the_validator(tmp_path: Path) -> None:
    doc = copy.deepcopy(index())
    doc["parts"]["arm-0/part-00000.parquet"]["rows"] = -1
    (tmp_path / "index.json").write_text(json.dumps(doc))
    with pytest.raises(BadInput, match=r"malformed at parts/arm-0/part-00000\.parquet/rows"):
        read_index(tmp_path)


def test_a_row_count_past_the_bound_is_refused_naming_the_field(tmp_path: Path) -> None:
    doc = index()
    doc["parts"]["arm-0/part-00000.parquet"]["rows"] = MAX_PART_ROWS + 1
    (tmp_path / "index.json").write_text(json.dumps(doc))
    with pytest.raises(BadInput, match=r"malformed at parts/arm-0/part-00000\.parquet/rows"):
        read_index(tmp_path)
