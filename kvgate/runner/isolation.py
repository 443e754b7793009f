"""Isolation, verified from the stored cache counters rather than assumed (DESIGN.md, "Engines").

Every namespace starts empty, and only reuse arms may serve a request from cached KV: any cache hit in
another arm (the control, its A/A replicate, eviction, quantisation, offload) means namespaces leak, and
a reuse arm whose first pass never hits did not reuse at all. Either way the run is an error, not a
result.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from kvgate.runner.manifest import read_manifest
from kvgate.runner.store import read_results


def spec_kinds(spec: dict[str, Any]) -> set[str]:
    """Every kind in a stored treatment spec, composites included."""
    return {spec["kind"]}.union(*(spec_kinds(part) for part in spec.get("of", [])))


def isolation_violations(run_dir: Path) -> list[str]:
    """One sentence per pass whose counters contradict its arm; empty when isolation held."""
    manifest = read_manifest(run_dir)
    rows = read_results(run_dir, ["arm", "replicate", "attempt", "n_cached_tokens"]).to_pylist()
    hits: dict[tuple[str, int, int], list[bool]] = defaultdict(list)
    for row in rows:
        hits[(row["arm"], row["replicate"], row["attempt"])].append(row["n_cached_tokens"] > 0)
    violations = []
    for (arm, replicate, attempt), flags in sorted(hits.items()):
        label = (
            arm
            + (f" (A/A replicate {replicate})" if replicate else "")
            + (f" rerun {attempt}" if attempt else "")
        )
        if arm not in manifest["arms"]:
            violations.append(f"rows of arm {arm!r}, which the run's manifest does not name")
            continue
        reuse = "reuse" in spec_kinds(manifest["arms"][arm]["spec"])
        if not reuse and any(flags):
            violations.append(
                f"arm {label!r} reported cache hits in {sum(flags)} of {len(flags)} cases, "
                "but its namespace starts empty and it may not reuse: namespaces leak"
            )
        elif reuse and attempt == 0 and len(flags) > 1 and not any(flags):
            violations.append(
                f"reuse arm {label!r} reported no cache hits in {len(flags)} cases: it never reused"
            )
    return violations
