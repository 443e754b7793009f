"""The run manifest: everything that identifies a run, written before its first generation.

The run id is the UTC time the run was created and a hash of the resolved spec (workload, model, engine,
arms, policy, case selection): `20261130T101500.123Z-3fa2c1d4e5f6`. Every `kvgate run` is a new run that
sorts by time (a nightly job measures again); runs with the same hash ran the same spec. Resuming
compares the parts that must not change.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kvgate import __version__
from kvgate.bounded_file import load_json
from kvgate.errors import BadInput, EngineFailure
from kvgate.gate.policy import Policy
from kvgate.gate.policy_diff import policy_changes
from kvgate.paths import REPO_ROOT
from kvgate.rundir.hardware import check_pairing
from kvgate.rundir.manifest_schema import check_manifest_shape
from kvgate.rundir.part_index import file_sha256
from kvgate.treatments.matrix import Matrix
from kvgate.workload.schema import Workload, atomic_write

MANIFEST = "manifest.json"
IDENTITY_KEYS = (
    "workload_sha256", "model", "engine", "engine_options", "arms", "policy_sha256", "case_ids", "matrix",
)  # fmt: skip
MAX_MANIFEST_BYTES = 1 << 26
LABELS = {
    "workload_sha256": "workload sha256",
    "policy_sha256": "policy sha256",
    "case_ids": "case selection",
    "engine_options": "engine options (-E)",
}


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def spec_hash(identity: dict[str, Any]) -> str:
    """The first 12 hex digits of the sha256 of the identity fields' canonical JSON."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]


def run_id_of(created: datetime, identity: dict[str, Any]) -> str:
    """`<UTC time to the millisecond>-<spec hash>`: sorts by time, names the spec."""
    stamp = created.astimezone(UTC).strftime("%Y%m%dT%H%M%S") + f".{created.microsecond // 1000:03d}Z"
    return f"{stamp}-{spec_hash(identity)}"


def spec_hash_of_run_id(run_id: str) -> str:
    """The spec hash a run id ends with."""
    return run_id.rsplit("-", 1)[-1]


def build_manifest(
    workload: Workload,
    case_ids: list[str],
    model: dict[str, Any],
    engine: dict[str, Any],
    matrix: Matrix,
    policy: Policy,
    limit: int | None = None,
    engine_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest of a new run; its `run_id` ends with the hash of the identity (what a resume must
    find unchanged)."""
    arms = {
        t.name: {
            "spec": t.to_dict(),
            "fingerprint": t.fingerprint(),
            "faults": matrix.faults_for(t.name),
            "batch_size": matrix.batch_size_for(t.name),
            **matrix.load_for(t.name),  # concurrency and kv_blocks, where the matrix sets them
        }
        for t in matrix.arms()
    }
    identity = {
        "workload_sha256": workload.sha256,
        "model": model,
        "engine": engine,
        "engine_options": engine_options or {},
        "arms": arms,
        "policy_sha256": policy.sha256,
        "case_ids": hashlib.sha256("\n".join(case_ids).encode()).hexdigest(),
        "matrix": {
            "control": matrix.control.name,
            "candidates": [c.name for c in matrix.candidates],
            "aa_replicate": matrix.aa_replicate,
            "confirm_reruns": matrix.confirm_reruns,
            "seed": matrix.seed,
        },
    }
    created = datetime.now(UTC)
    return {
        "run_id": run_id_of(created, identity),
        **identity,
        "created_at": created.isoformat(timespec="milliseconds"),
        "workload_path": str(workload.path.resolve()) if workload.path else None,
        "workload_file_sha256": file_sha256(workload.path) if workload.path else None,
        "tokenizer": workload.meta.get("tokenizer"),
        "n_cases": len(case_ids),
        "limit": limit,
        "policy_text": policy.text,
        "matrix_name": matrix.name,
        "matrix_text": matrix.text,
        "kvgate_version": __version__,
        "git_commit": git_commit(),
        "host": {"machine": platform.machine(), "python": platform.python_version()},
    }


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Write the manifest atomically, checked as every read checks it (`verify_manifest`); a failed
    write is an infrastructure error (exit 4)."""
    verify_manifest(manifest, f"the manifest of run {manifest.get('run_id')}")
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    try:
        atomic_write(run_dir / MANIFEST, lambda f: f.write(text.encode()))
    except OSError as exc:
        raise EngineFailure(f"cannot write {run_dir / MANIFEST}: {exc.strerror or exc}") from None


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's manifest, verified (`verify_manifest`); any defect is a one-line BadInput naming it."""
    path = run_dir / MANIFEST
    if run_dir.is_file():  # was: "cannot read manifest RUN/manifest.json: Not a directory"
        raise BadInput(f"{run_dir} is a file, not a run's folder; `kvgate runs [RUNS_DIR]` lists the runs")
    try:
        if path.is_symlink():
            raise BadInput(f"{path} is a link, not the run's own manifest; use the run it belongs to")
        manifest = load_json(path, MAX_MANIFEST_BYTES, "manifest")
    except FileNotFoundError:
        if not run_dir.exists():
            raise BadInput(f"run {run_dir} does not exist; `kvgate runs [RUNS_DIR]` lists the runs") from None
        if stopped_before_it_began(run_dir):
            raise BadInput(
                f"{run_dir} has no {MANIFEST}: the run was stopped before it began, so nothing was "
                "generated; start it again with the same `kvgate run` command"
            ) from None
        raise BadInput(f"{run_dir} is not a kvgate run: no {MANIFEST}") from None
    verify_manifest(manifest, str(path))
    return dict(manifest)


def stopped_before_it_began(run_dir: Path) -> bool:
    """A run killed before its manifest: only its lock and a results folder with no part (nothing
    generated)."""
    try:
        names = {c.name for c in run_dir.iterdir()}
    except OSError:  # no such directory, or not one
        return False
    return (
        ".lock" in names
        and names <= {".lock", "results"}
        and not any(run_dir.glob("results/*/part-*.parquet"))
    )


def verify_manifest(manifest: Any, where: str) -> None:
    """The manifest has the schema's shape, its policy text hashes to its `policy_sha256`, its run id ends
    with the hash of its identity fields, and its arms are its matrix's: a one-line BadInput naming what
    changed otherwise."""
    check_manifest_shape(manifest, where)
    if hashlib.sha256(manifest["policy_text"].encode()).hexdigest() != manifest["policy_sha256"]:
        raise BadInput(f"{where}: policy_text does not match policy_sha256: the policy was edited")
    recomputed = spec_hash({k: manifest[k] for k in IDENTITY_KEYS})
    if recomputed != spec_hash_of_run_id(manifest["run_id"]):
        raise BadInput(
            f"{where}: run id {manifest['run_id']} does not match its identity fields (they hash to "
            f"{recomputed}): the workload, model, engine, arms, policy or matrix was edited after the run"
        )
    matrix = manifest["matrix"]
    if set(manifest["arms"]) != {matrix["control"], *matrix["candidates"]}:
        raise BadInput(f"{where}: its arms are not its matrix's control and candidates")
    check_pairing(manifest, where)


def changed_identity(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What differs between a stored manifest and the current spec, in words (empty when resumable)."""
    changed = []
    for key in IDENTITY_KEYS:
        old, new = stored.get(key), current[key]
        if key == "arms":
            for arm in sorted(set(old or {}) | set(new)):
                if (old or {}).get(arm) != new.get(arm):
                    changed.append(f"arm {arm!r} ({_difference((old or {}).get(arm), new.get(arm))})")
        elif key == "policy_sha256" and old != new and "policy_text" in stored:
            changed.append(f"policy ({policy_changes(stored['policy_text'], current['policy_text'])})")
        elif old != new:
            changed.append(f"{LABELS.get(key, key)} ({_difference(old, new)})")
    return changed


def _difference(old: Any, new: Any) -> str:
    """A short account of how `old` became `new`: the keys that differ, or the values."""
    if old is None:
        return "added"
    if new is None:
        return "removed"
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        return ", ".join(f"{k}: {_short(old.get(k))} → {_short(new.get(k))}" for k in keys)
    return f"{_short(old)} → {_short(new)}"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 24 else text[:12] + "…"
