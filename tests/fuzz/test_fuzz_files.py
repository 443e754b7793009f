"""Fuzz the files kvgate reads back: frozen workloads and run directories. A damaged workload is refused
(exit 2, one line) or, when the damage missed everything read, verifies as the same content; a tampered
run is refused with no verdict, or reports exactly the verdict it had; reading writes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fuzz_support import FUZZ, assert_refused, fresh, tree
from helpers.cli import kvgate
from hypothesis import given
from hypothesis import strategies as st

from kvgate.workload.schema import META_KEY

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
FLIPS = st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=6)


def _flip(path: Path, flips: list[tuple[float, int]]) -> None:
    data = bytearray(path.read_bytes())
    for where, mask in flips:
        data[int(where * len(data))] ^= mask
    path.write_bytes(bytes(data))


# --- workloads ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checked(smoke_workload: Path) -> str:
    """What `freeze --check` prints for the intact workload, path left out."""
    result = kvgate("freeze", "--check", smoke_workload)
    assert result.exit_code == 0
    return result.stdout.split(":", 1)[1]


def _with_meta(source: Path, target: Path, meta: Any) -> None:
    table = pq.read_table(source)
    raw = json.dumps(meta).encode() if not isinstance(meta, bytes) else meta
    pq.write_table(table.replace_schema_metadata({META_KEY: raw}), target)


def _with_rows(source: Path, target: Path, edit: str) -> None:
    """Rows a freeze never writes, under metadata whose content hash is left as it was."""
    table = pq.read_table(source)
    ids = table["case_id"].to_pylist()
    if edit == "empty ids":
        table = table.set_column(0, "case_id", pa.array([""] * len(ids)))
    elif edit == "duplicate ids":
        table = table.set_column(0, "case_id", pa.array([ids[0]] * len(ids)))
    elif edit == "negative max_new_tokens":
        i = table.schema.get_field_index("max_new_tokens")
        table = table.set_column(i, "max_new_tokens", pa.array([-1] * len(ids), pa.int32()))
    elif edit == "no rows":
        table = table.slice(0, 0)
    elif edit == "extra rows":
        table = pa.concat_tables([table, table])
    pq.write_table(table, target)


WORKLOAD_DAMAGE = st.one_of(
    st.tuples(st.just("flip"), FLIPS),
    st.tuples(st.just("truncate"), st.floats(0, 1, exclude_max=True)),
    st.tuples(st.just("meta"), JSON),
    st.tuples(st.just("raw meta"), st.binary(max_size=40)),
    st.tuples(
        st.just("rows"),
        st.sampled_from(["empty ids", "duplicate ids", "negative max_new_tokens", "no rows", "extra rows"]),
    ),
)


@FUZZ
@given(damage=WORKLOAD_DAMAGE)
def test_damaged_workloads(
    smoke_workload: Path, checked: str, tmp_path: Path, damage: tuple[str, Any]
) -> None:
    tmp_path = fresh(tmp_path)
    path = tmp_path / "w.parquet"
    kind, detail = damage
    shutil.copy(smoke_workload, path)
    if kind == "flip":
        _flip(path, detail)
    elif kind == "truncate":
        path.write_bytes(path.read_bytes()[: int(detail * path.stat().st_size)])
    elif kind in ("meta", "raw meta"):
        _with_meta(smoke_workload, path, detail)
    else:
        _with_rows(smoke_workload, path, detail)
    before = tree(tmp_path)
    result = kvgate("freeze", "--check", path)
    if result.exit_code == 0:  # the damage missed everything read: the same content, verified
        assert result.stdout.split(":", 1)[1] == checked, damage
    else:
        assert_refused(result, damage)
    assert tree(tmp_path) == before


# --- run directories ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def verdict(finished_run: Path) -> dict[str, Any]:
    result = kvgate("report", finished_run, "--format", "json")
    assert result.exit_code == 1
    return _decisions(json.loads(result.stdout))


def _decisions(report: dict[str, Any]) -> dict[str, Any]:
    return {"exit": report["exit_code"], "arms": [(a["arm"], a["decision"]) for a in report["arms"]]}


MANIFEST_KEYS = st.sampled_from(
    [
        "run_id", "workload_sha256", "model", "engine", "engine_options", "arms", "policy_sha256", "case_ids",
        "matrix", "workload_path", "n_cases", "limit", "policy_text", "created_at", "matrix_text",
    ]
)  # fmt: skip


def _set_path(data: Any, path: list[int], value: Any, delete: bool) -> None:
    """Replace (or delete) the value reached by following `path` (indices into keys or items) inside the
    object or list `data`."""
    if not isinstance(data, dict | list):
        return
    for step in path:
        children = list(data) if isinstance(data, dict) else list(range(len(data)))
        child = children[step % len(children)] if children else None
        target = data[child] if child is not None else None
        if not isinstance(target, dict | list) or not target:
            if child is None:
                return
            if delete and isinstance(data, dict):
                del data[child]
            else:
                data[child] = value
            return
        data = target


STEPS = st.lists(st.integers(0, 50), max_size=4)
RUN_DAMAGE = st.one_of(
    st.tuples(st.just("manifest value"), st.tuples(MANIFEST_KEYS, STEPS, JSON)),
    st.tuples(st.just("manifest delete"), st.tuples(MANIFEST_KEYS, STEPS)),
    st.tuples(st.just("manifest whole"), JSON),
    st.tuples(st.just("manifest bytes"), FLIPS),
    st.tuples(st.just("part bytes"), st.tuples(st.integers(0, 10), FLIPS)),
    st.tuples(st.just("index value"), st.tuples(st.lists(st.integers(0, 50), max_size=4), JSON)),
    st.tuples(st.just("part moved"), st.integers(0, 10)),
    st.tuples(st.just("part copied"), st.integers(0, 10)),
    st.tuples(st.just("lock"), st.sampled_from(["folder", "link out", "fifo"])),
    st.tuples(
        st.just("index file"), st.sampled_from(["fifo", "link to /dev/zero", "folder", "deep", "gone"])
    ),
    st.tuples(st.just("results"), st.sampled_from(["gone", "a file", "link out"])),
)


def _damage_run(run: Path, damage: tuple[str, Any], outside: Path) -> None:
    kind, detail = damage
    manifest_path = run / "manifest.json"
    parts = sorted((run / "results").glob("*/part-*.parquet"))
    if kind.startswith("manifest") and kind != "manifest bytes":
        manifest = json.loads(manifest_path.read_text())
        if kind == "manifest whole":
            manifest = detail
        elif kind == "manifest value":
            key, path, value = detail
            if path and isinstance(manifest[key], dict | list):
                _set_path(manifest[key], path, value, delete=False)
            else:
                manifest[key] = value
        else:
            key, path = detail
            if path and isinstance(manifest[key], dict | list):
                _set_path(manifest[key], path, None, delete=True)
            else:
                del manifest[key]
        manifest_path.write_text(json.dumps(manifest))
    elif kind == "manifest bytes":
        _flip(manifest_path, detail)
    elif kind == "part bytes":
        _flip(parts[detail[0] % len(parts)], detail[1])
    elif kind == "index value":
        index = run / "results" / "index.json"
        data = json.loads(index.read_text())
        path, value = detail
        _set_path(data, path or [0], value, delete=False)
        index.write_text(json.dumps(data))
    elif kind == "index file":
        _replace_index(run / "results" / "index.json", detail)
    elif kind == "results":
        shutil.rmtree(run / "results")
        if detail == "a file":
            (run / "results").write_text("")
        elif detail == "link out":
            (run / "results").symlink_to(outside.parent)
    elif kind in ("part moved", "part copied"):
        part = parts[detail % len(parts)]
        other = next(p for p in (run / "results").iterdir() if p.is_dir() and p != part.parent)
        (shutil.move if kind == "part moved" else shutil.copy)(part, other / "part-00042.parquet")
    elif (run / ".lock").unlink(missing_ok=True) or detail == "folder":
        (run / ".lock").mkdir()
    elif detail == "link out":
        (run / ".lock").symlink_to(outside)
    else:
        import os

        os.mkfifo(run / ".lock")


def _replace_index(index: Path, how: str) -> None:
    """The run's index replaced by a special file, a link to an endless device, or deep JSON."""
    import os

    index.unlink()
    if how == "fifo":
        os.mkfifo(index)
    elif how == "link to /dev/zero":
        index.symlink_to("/dev/zero")
    elif how == "folder":
        index.mkdir()
    elif how == "deep":
        index.write_text("[" * 100_000 + "]" * 100_000)


@FUZZ
@given(damage=RUN_DAMAGE)
def test_tampered_runs(finished_run: Path, verdict: dict[str, Any], tmp_path: Path, damage: Any) -> None:
    tmp_path = fresh(tmp_path)
    run = tmp_path / finished_run.name
    shutil.copytree(finished_run, run)
    outside = tmp_path / "outside"
    outside.write_text("")
    _damage_run(run, damage, outside)
    before = tree(tmp_path)
    result = kvgate("report", run, "--format", "json")
    if result.exit_code != 2:  # the damage changed nothing the gate reads: the same verdict
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        assert not crashed, (damage, result.exception)
        assert _decisions(json.loads(result.stdout)) == verdict, damage
    else:
        assert_refused(result, damage)
    assert tree(tmp_path) == before and outside.read_text() == ""
