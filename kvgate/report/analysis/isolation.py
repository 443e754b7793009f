"""Isolation, verified from the stored cache counters rather than assumed (docs/reference.md, "Isolation").

Every namespace starts empty, and only reuse arms may serve a request from cached KV: any cache hit in
another arm (the control, its A/A replicate, eviction, quantisation, offload) means namespaces leak, and
a reuse arm whose first pass never hits did not reuse at all. A prefix-reuse arm may hit, but only on KV
it computed itself: a prompt can never find more cached tokens than the longest prefix it shares with
some other prompt of the run, so a row that reads more was served KV from another namespace (another
arm, a re-run, another run). That bound does not apply to span reuse (a span is found at any offset) or
on engines that prefill each reuse prompt once before measuring it (`reuse_reads_own_prompt`: vLLM, which
probes a fresh namespace itself). Any of these makes the run an error, not a result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from kvgate.arrow_numpy import dictionary_codes, int64_array, to_numpy
from kvgate.rundir.manifest import read_manifest
from kvgate.rundir.store import read_results


def spec_kinds(spec: dict[str, Any]) -> set[str]:
    """Every kind in a stored treatment spec, composites included."""
    return {spec["kind"]}.union(*(spec_kinds(part) for part in spec.get("of", [])))


def shared_prefixes(prompts: Sequence[Sequence[int]]) -> list[int]:
    """For each prompt, the longest prefix it shares with any other prompt (0 when none). In sorted
    order the closest neighbours share the longest prefixes, so one pass over neighbours suffices."""
    order = sorted(range(len(prompts)), key=lambda i: tuple(prompts[i]))
    best = [0] * len(prompts)
    for a, b in pairwise(order):
        x, y = np.asarray(prompts[a]), np.asarray(prompts[b])
        n = min(x.size, y.size)
        differ = np.flatnonzero(x[:n] != y[:n])
        shared = int(differ[0]) if differ.size else n
        best[a], best[b] = max(best[a], shared), max(best[b], shared)
    return best


def prefix_reuse_only(spec: dict[str, Any]) -> bool:
    """Whether the arm reuses KV, and only by prefix (no span reuse in it)."""
    parts = spec.get("of") or [spec]
    reuse = [p for p in parts if p["kind"] == "reuse"]
    return bool(reuse) and all(p.get("mode", "prefix") == "prefix" for p in reuse)


def _run_prompts(manifest: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """The run's case ids and prompt token ids. A run of every case reads the two columns alone (no
    pandas, which `kvgate report` must not import); a `--limit` run selects its cases as it ran them."""
    path = Path(manifest["workload_path"])
    if manifest.get("limit") is None:
        with pq.ParquetFile(path) as workload:
            table = workload.read(columns=["case_id", "prompt_token_ids"], use_threads=False)
        return table.column("case_id").to_pylist(), table.column("prompt_token_ids").to_pylist()
    from kvgate.workload.schema import read_workload
    from kvgate.workload.selection import select_cases

    cases = select_cases(read_workload(path), manifest.get("limit"))
    return [c.case_id for c in cases], [c.prompt_token_ids for c in cases]


def foreign_hits(run_dir: Path, manifest: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """Reuse-arm rows (of `rows`, those with cache hits) that read more cached tokens than their prompt
    shares with any other prompt."""
    from kvgate.engines.registry import ENGINES

    engine = ENGINES.get(str(manifest["engine"].get("engine")))
    if engine is None or engine.reuse_reads_own_prompt:
        return []
    reuse_arms = {a for a, info in manifest["arms"].items() if prefix_reuse_only(info["spec"])}
    suspect = [r for r in rows if r["arm"] in reuse_arms and r["n_cached_tokens"] > 0]
    if not suspect:
        return []
    ids, prompts = _run_prompts(manifest)
    if any(p is None for p in prompts):
        return []
    allowed = dict(zip(ids, shared_prefixes(prompts), strict=True))
    over = [r for r in suspect if r["n_cached_tokens"] > allowed.get(r["case_id"], 0)]
    violations = []
    for arm in sorted({r["arm"] for r in over}):
        mine = [r for r in over if r["arm"] == arm]
        first = mine[0]
        violations.append(
            f"reuse arm {arm!r} read more cached tokens than its own prompts can explain in {len(mine)} "
            f"rows (case {first['case_id']}: {first['n_cached_tokens']} cached, at most "
            f"{allowed.get(first['case_id'], 0)} shared with any other prompt): KV from another namespace"
        )
    return violations


@dataclass(frozen=True)
class PassCounters:
    """The stored rows' cache counters, one entry per row in store order (what isolation is counted from).

    `arm` indexes `arm_names` (−1: a row with no arm); `case_id(rows)` gives the case ids of the rows at
    the indices `rows` (only the rows with cache hits are ever asked for)."""

    arm: np.ndarray
    arm_names: list[str]
    replicate: np.ndarray
    attempt: np.ndarray
    n_cached_tokens: np.ndarray
    case_id: Callable[[np.ndarray], list[str]]


def stored_counters(run_dir: Path) -> PassCounters:
    """The counters of every stored row of the run, read from its parts."""
    table = read_results(run_dir, ["case_id", "arm", "replicate", "attempt", "n_cached_tokens"])
    arm_codes, arm_names = dictionary_codes(table["arm"])
    return PassCounters(
        arm=arm_codes,
        arm_names=arm_names,
        replicate=to_numpy(table["replicate"], 0, np.int64),
        attempt=to_numpy(table["attempt"], 0, np.int64),
        n_cached_tokens=to_numpy(table["n_cached_tokens"], 0, np.int64),
        case_id=lambda rows: table["case_id"].take(int64_array(rows)).to_pylist(),
    )


def isolation_violations(run_dir: Path, counters: PassCounters | None = None) -> list[str]:
    """One sentence per pass whose counters contradict its arm; empty when isolation held.

    Counted over all rows at once (numpy over the columns, no per-row Python): `kvgate report` runs
    this on every report, a million rows included, from the columns it has read already (`counters`);
    without them the run's parts are read."""
    manifest = read_manifest(run_dir)
    c = counters if counters is not None else stored_counters(run_dir)
    arm_codes, replicate, attempt = c.arm, c.replicate, c.attempt
    hit = c.n_cached_tokens > 0
    # One int64 key per pass (arm, replicate, attempt), each shifted to start at 0 (a null arm is −1).
    columns = [arm_codes, replicate, attempt]
    lows = [int(col.min()) if col.size else 0 for col in columns]
    spans = [int(col.max()) - low + 1 if col.size else 1 for col, low in zip(columns, lows, strict=True)]
    key = ((arm_codes - lows[0]) * spans[1] + (replicate - lows[1])) * spans[2] + (attempt - lows[2])
    _, first, group = np.unique(key, return_index=True, return_inverse=True)
    n_rows = np.bincount(group, minlength=len(first))
    n_hits = np.bincount(group, weights=hit, minlength=len(first)).astype(np.int64)
    names = [*c.arm_names, None]  # code −1: a row with no arm
    counted = sorted(
        (str(names[arm_codes[i]]), int(replicate[i]), int(attempt[i]), int(n_rows[g]), int(n_hits[g]))
        for g, i in enumerate(first.tolist())
    )
    violations = []
    for arm, rep, att, rows, hits in counted:
        label = arm + (f" (A/A replicate {rep})" if rep else "") + (f" rerun {att}" if att else "")
        if arm not in manifest["arms"]:
            violations.append(f"rows of arm {arm!r}, which the run's manifest does not name")
            continue
        reuse = "reuse" in spec_kinds(manifest["arms"][arm]["spec"])
        if not reuse and hits:
            violations.append(
                f"arm {label!r} reported cache hits in {hits} of {rows} cases, "
                "but its namespace starts empty and it may not reuse: namespaces leak"
            )
        elif reuse and att == 0 and rows > 1 and not hits:
            violations.append(f"reuse arm {label!r} reported no cache hits in {rows} cases: it never reused")
    at = np.flatnonzero(hit)
    suspect = [
        {"case_id": case_id, "arm": names[code], "n_cached_tokens": int(cached)}
        for case_id, code, cached in zip(
            c.case_id(at), arm_codes[at].tolist(), c.n_cached_tokens[at].tolist(), strict=True
        )
    ]
    return violations + foreign_hits(run_dir, manifest, suspect)
