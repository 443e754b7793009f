"""A workload's slice structure as the gate sees it, for `kvgate simulate` (gate.simulate.Structure):
the report's slices of every case, their roles under the policy, and the cases' clusters."""

from __future__ import annotations

import numpy as np

from kvgate.gate.policy import NO_CLUSTER, Policy
from kvgate.gate.procedure import Family
from kvgate.gate.simulate import Structure
from kvgate.report.analysis.run_data import CaseTable
from kvgate.report.analysis.slices import cluster_ids, is_gated, slice_groups


def gate_structure(cases: CaseTable, policy: Policy) -> Structure:
    groups, _ = slice_groups(cases, policy)
    clusters, _ = cluster_ids(cases, policy)
    names = [n for g in groups for n in g.names]
    family = Family(
        tau=np.array([policy.tau_for(n) for n in names]),
        gated=np.array([is_gated(n, policy) for n in names], dtype=bool),
    )
    defect_groups = cases.clusters if policy.cluster == NO_CLUSTER else clusters
    return Structure.from_codes(
        [g.codes for g in groups], [g.size for g in groups], clusters, names, family, defect_groups
    )
