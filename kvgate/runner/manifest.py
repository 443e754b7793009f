"""The run manifest: everything that identifies a run, written before its first generation.

The run id is a hash of the resolved spec (workload, model, engine, arms, policy, case selection), so
the same spec names the same run directory; resuming compares the parts that must not change.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from pathlib import Path
from typing import Any

from kvgate import __version__
from kvgate.errors import BadInput
from kvgate.gate.policy import Policy
from kvgate.paths import REPO_ROOT
from kvgate.treatments.matrix import Matrix
from kvgate.workload.schema import Workload, atomic_write

MANIFEST = "manifest.json"
IDENTITY_KEYS = ("workload_sha256", "model", "engine", "arms", "policy_sha256", "case_ids", "matrix")


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def build_manifest(
    workload: Workload,
    case_ids: list[str],
    model: dict[str, Any],
    engine: dict[str, Any],
    matrix: Matrix,
    policy: Policy,
    limit: int | None = None,
) -> dict[str, Any]:
    arms = {
        t.name: {"spec": t.to_dict(), "fingerprint": t.fingerprint(), "faults": matrix.faults_for(t.name)}
        for t in matrix.arms()
    }
    identity = {
        "workload_sha256": workload.sha256,
        "model": model,
        "engine": engine,
        "arms": arms,
        "policy_sha256": policy.sha256,
        "case_ids": hashlib.sha256("\n".join(case_ids).encode()).hexdigest(),
        "matrix": {
            "control": matrix.control.name,
            "candidates": [c.name for c in matrix.candidates],
            "aa_replicate": matrix.aa_replicate,
            "confirm_reruns": matrix.confirm_reruns,
        },
    }
    run_id = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]
    return {
        "run_id": run_id,
        **identity,
        "workload_path": str(workload.path.resolve()) if workload.path else None,
        "n_cases": len(case_ids),
        "limit": limit,
        "policy_text": policy.text,
        "matrix_text": matrix.text,
        "batch_size": matrix.batch_size,
        "kvgate_version": __version__,
        "git_commit": git_commit(),
        "host": {"machine": platform.machine(), "python": platform.python_version()},
    }


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    atomic_write(run_dir / MANIFEST, lambda f: f.write(text.encode()))


def read_manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / MANIFEST
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise BadInput(f"{run_dir} is not a kvgate run: no {MANIFEST}") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise BadInput(f"{path} is unreadable: {exc}") from None
    return manifest


def changed_identity(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Names of what differs between a stored manifest and the current spec (empty when resumable)."""
    changed = []
    for key in IDENTITY_KEYS:
        if key == "arms":
            for arm in sorted(set(stored.get("arms", {})) | set(current["arms"])):
                if stored.get("arms", {}).get(arm) != current["arms"].get(arm):
                    changed.append(f"arm {arm!r}")
        elif stored.get(key) != current[key]:
            changed.append(key.replace("_sha256", "").replace("_", " "))
    return changed
