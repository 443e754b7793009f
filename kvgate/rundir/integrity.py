"""Verify a stored run before it is reported: nothing it holds changed since kvgate wrote it.

The manifest is verified as every read verifies it (shape, policy hash, run id; `read_manifest`). Here:
the workload's rows are hashed again against the run's content hash; every live result part must be
listed in the run's index with the same sha256 and be bound to this run and its arm; every listed part
must exist (`kvgate report` checks each part's sha256 and binding from the bytes it reads the part
from, `PartCheck`, so every part is opened once). A run whose lock a writer holds and that still lacks
rows is in progress: an EngineFailure (exit 4), no verdict. Anything else that differs is a one-line
BadInput naming it (exit 2).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kvgate.errors import BadInput, EngineFailure
from kvgate.rundir.lock import lock_held
from kvgate.rundir.part_index import INDEX, file_sha256, key_of, read_binding, read_index
from kvgate.rundir.store import changed, check_bound, part_paths, results_dir
from kvgate.workload.schema import stream_content_sha256


@dataclass(frozen=True)
class PartCheck:
    """What a live part must match: its sha256 in the run's index, and a binding to this run and the arm
    whose folder holds it. A reader that has the part's bytes and metadata checks them here, so that
    verifying and reading a part open it once (`kvgate report` does)."""

    results: Path
    run_id: str
    listed: dict[str, Any]
    live: tuple[Path, ...] | None = None
    """The live parts `verify_run` found each listed in the index and the index's every part among (the
    store's `part_paths`), for the reader to read rather than list the folder again; None: not listed."""

    def __call__(self, path: Path, data: bytes, metadata: dict[bytes, bytes] | None, rows: int) -> None:
        """`rows`: the part's row count as its footer states it (read with its metadata)."""
        key = key_of(self.results, path)
        if hashlib.sha256(data).hexdigest() != self.listed[key]["sha256"]:
            changed(path)
        check_bound(path, read_binding(metadata), self.run_id, path.parent.name)
        self.check_rows(path, rows, key)

    def check_rows(self, path: Path, rows: int, key: str | None = None) -> None:
        """The index's row count for the part is the part's own (an edited count is refused, not used);
        `key`: the part's index key, when known."""
        listed = self.listed[key or key_of(self.results, path)]["rows"]
        if listed != rows:
            raise BadInput(
                f"{self.results / INDEX} lists {listed} rows for {path}, which holds {rows}: the index "
                "was changed after it was written"
            )


def verify_run(run_dir: Path, manifest: dict[str, Any], parts: bool = True) -> PartCheck:
    """Refuse a run in progress (exit 4) or one whose workload or results changed (exit 2).

    `parts` False leaves each live part's checksum and binding to the reader, which passes its bytes to
    the PartCheck returned (the listing is checked here either way: no part unlisted, none missing)."""
    results = results_dir(run_dir)
    if lock_held(run_dir):
        _refuse_if_incomplete(run_dir, manifest, read_index(results))
    if results.is_symlink() or not results.is_dir():
        raise BadInput(
            f"run {run_dir} has no results folder of its own: not a complete run; "
            f"`kvgate run --resume {run_dir}` generates its rows"
        )
    listed = read_index(results, manifest["run_id"])
    _verify_workload(manifest)
    check = PartCheck(results, manifest["run_id"], listed)
    return replace(check, live=tuple(_verify_parts(run_dir, check, parts)))


def expected_rows(manifest: dict[str, Any]) -> dict[str, int]:
    """The first-attempt rows each arm stores when the run is complete."""
    matrix, n = manifest["matrix"], manifest["n_cases"]
    control = {matrix["control"]: n * (2 if matrix["aa_replicate"] else 1)}
    return control | {arm: n for arm in matrix["candidates"]}


def _refuse_if_incomplete(run_dir: Path, manifest: dict[str, Any], listed: dict[str, Any]) -> None:
    stored: dict[str, int] = {}
    for key, part in listed.items():
        arm = key.split("/", 1)[0]
        stored[arm] = stored.get(arm, 0) + part["rows"]
    for arm, want in expected_rows(manifest).items():
        if stored.get(arm, 0) < want:
            raise EngineFailure(
                f"run {run_dir} is in progress (another kvgate process holds its lock): arm {arm!r} has "
                f"{stored.get(arm, 0)} of {want} rows; report it when the run ends"
            )


def _verify_workload(manifest: dict[str, Any]) -> None:
    """The workload's rows are the ones the run verified when it started: the file's bytes hash to what
    the manifest recorded then (a fast check), else every row is hashed again against the content hash."""
    path = Path(manifest["workload_path"])
    recorded = manifest.get("workload_file_sha256")
    if recorded is not None and path.is_file() and file_sha256(path) == recorded:
        return
    sha, meta = stream_content_sha256(path)  # every row hashed again
    if sha != meta["content_sha256"]:
        raise BadInput(f"workload {path} rows do not match its content sha256: it was changed after freezing")
    if sha != manifest["workload_sha256"]:
        raise BadInput(f"workload {path} changed since run {manifest['run_id']} (content sha256 differs)")


def _verify_parts(run_dir: Path, check: PartCheck, read_parts: bool) -> list[Path]:
    """Every live part listed and every listed part live; with `read_parts`, each one's sha256 and
    binding too (else the reader checks those). Returns the live parts."""
    results, listed = check.results, check.listed
    index = results / INDEX
    live = part_paths(run_dir)
    if live and not index.exists():
        raise BadInput(f"run {run_dir} has result parts but no {index}: it was removed")
    keys = [key_of(results, path) for path in live]
    for path, key in zip(live, keys, strict=True):
        if key not in listed:
            raise BadInput(
                f"result part {path} is not in {index}: it was added after the run "
                f"(or a crash left it: `kvgate run --resume {run_dir}` verifies and lists it)"
            )
    present = set(keys)
    gone = sorted(k for k in listed if k not in present)
    if gone:
        raise BadInput(
            f"result part {results / gone[0]} listed in {index} is missing: it was deleted "
            f"(`kvgate run --resume {run_dir}` regenerates its rows)"
        )
    for path in live if read_parts else []:
        if file_sha256(path) != listed[key_of(results, path)]["sha256"]:
            changed(path)
        check_bound(path, read_binding(_metadata(path)), check.run_id, path.parent.name)
        check.check_rows(path, pq.read_metadata(path).num_rows)
    return live


def _metadata(path: Path) -> dict[bytes, bytes] | None:
    try:
        return pq.read_schema(path).metadata
    except (OSError, pa.ArrowException) as exc:
        raise BadInput(f"result part {path} is corrupt ({str(exc).splitlines()[0]})") from None
