"""What the gate counts a case's cluster as before any report exists."""

from __future__ import annotations

from kvgate.gate.policy import NO_CLUSTER, Policy
from kvgate.workload.case import Case


def cluster_key(case: Case, policy: Policy) -> str:
    """What the gate counts the case's cluster as (analysis.slices.cluster_ids, from a Case)."""
    if policy.cluster == NO_CLUSTER:
        return case.case_id
    value = case.prefix_group if policy.cluster == "prefix_group" else case.slices.get(policy.cluster)
    return f"cluster:{value}" if value else case.case_id
