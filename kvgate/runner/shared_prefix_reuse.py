"""The warning `kvgate run` gives when a reuse arm meets shared prefixes the workload counts as many
clusters (docs/gate.md, "What counts as a cluster").

Trace and data-set import split a shared prefix under `prefix_min_share` of the prompts (a short system
prompt) into a cluster per request, naming it in the `shared_prefix` slice: that assumes a fault in the
prefix fails the requests one by one. An arm that reuses KV (prefix or span reuse) serves that prefix
from its cache, so one stale or corrupted copy fails every request that reads it: for that arm the
requests are not independent, and the gate would count them as more evidence than they are. Freeze
cannot see the matrix; the run can, and says so once, naming the shared prefixes and the declaration
that counts each as one cluster (`prefix_min_share = 0`, at freeze).

It is not said when the policy does not count clusters by prefix group (`cluster = "none"` or another
column) or declares failures independent inside a cluster (`defects = "per_case"`): those are the
user's own declarations, and `prefix_min_share` would change nothing under them.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvgate.gate.policy import Policy
from kvgate.runner.passes import reuses
from kvgate.treatments.matrix import Matrix
from kvgate.workload.case import Case
from kvgate.workload.clusters import cluster_structure

NAMED = 3
"""Shared prefixes named in the line; the rest are counted."""


def shared_prefix_reuse_warning(matrix: Matrix, cases: Sequence[Case], policy: Policy) -> str | None:
    """The warning's one line, or None when no reuse arm meets a shared prefix counted as several
    clusters (or the policy's cluster declaration makes the split irrelevant)."""
    if policy.cluster != "prefix_group" or policy.defects == "per_case":
        return None
    arms = [t.name for t in matrix.arms() if reuses(t)]
    split = [(n, p) for n, p in cluster_structure(cases).shared.items() if p.clusters > 1]
    if not arms or not split:
        return None
    named = ", ".join(
        f"{name!r} ({p.where}: {p.cases} cases counted as {p.clusters} clusters)" for name, p in split[:NAMED]
    )
    more = f" and {len(split) - NAMED} more" if len(split) > NAMED else ""
    which = f"arm {arms[0]!r} reuses" if len(arms) == 1 else f"arms {', '.join(map(repr, arms))} reuse"
    prefixes = "shared prefix" if len(split) == 1 else "shared prefixes"
    return (
        f"{which} cached KV over {prefixes} {named}{more}: a reuse arm serves a shared prefix from its "
        "cache, so a stale or corrupted copy fails its requests together and they are not independent "
        "for that arm; to count each shared prefix as one cluster, set prefix_min_share = 0 in the "
        'suite\'s [[trace]] or [[dataset]] and freeze again (docs/gate.md, "What counts as a cluster")'
    )
