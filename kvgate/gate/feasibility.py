"""Before a run: can every critical slice ever pass, and is the policy above the safety floor?

A gated slice passes only when its exact upper bound reaches τ with at least min_control_passes control
passes. With no failure at all, the bound on G effective cases (its clusters) is 1 − α^(1/G), so a slice
needs G ≥ ln α / ln(1 − τ) clusters (59 at τ = 5%, 95%) and n ≥ min_control_passes cases even if the
control passes every one. A critical slice smaller than that can never pass: the arm would be
inconclusive forever, so the run is refused before generating (unless `allow_unwinnable = true`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from kvgate.errors import BadInput
from kvgate.gate.policy import Policy, slice_terms

ALL, CRITICAL = "all", "critical"


def clusters_needed(tau: float, confidence: float) -> int | None:
    """Fewest effective cases whose zero-failure upper bound is ≤ τ; None when no count suffices (τ = 0)."""
    if tau <= 0:
        return None
    if tau >= 1:
        return 1
    return max(1, math.ceil(math.log(1 - confidence) / math.log(1 - tau) - 1e-12))


def critical_slices(policy: Policy, any_critical_case: bool) -> list[str]:
    """The gated slices other than `all`: the workload's `critical` cases, then those the policy names."""
    names = [CRITICAL] if any_critical_case else []
    return list(dict.fromkeys([*names, *(n for n in policy.named_slices if n != ALL)]))


def slice_members(name: str, labels: Mapping[str, str], critical: bool) -> bool:
    """Whether a case with these slice labels (and critical flag) is in the named slice."""
    if name == ALL:
        return True
    if name == CRITICAL:
        return critical
    return all(labels.get(column) == value for column, value in slice_terms(name))


def check_winnable(policy: Policy, cases: Iterable[tuple[Mapping[str, str], bool, str]]) -> None:
    """BadInput naming the first critical slice too small to ever pass. `cases`: per case, its slice
    labels, critical flag and cluster key (the policy's cluster; a case's own id when it has none)."""
    if policy.allow_unwinnable:
        return
    rows = list(cases)
    for name in critical_slices(policy, any(c for _, c, _ in rows)):
        inside = [key for labels, critical, key in rows if slice_members(name, labels, critical)]
        n, g = len(inside), len(set(inside))
        tau = policy.tau_for(name)
        need = clusters_needed(tau, policy.confidence)
        clustered = f" in {g} clusters" if g < n else ""
        if need is None:
            raise BadInput(
                f"critical slice {name!r} has τ = 0: no number of cases can pass it; "
                "set allow_unwinnable = true in the policy if it is only meant to fail"
            )
        if g < need or n < policy.min_control_passes:
            needed = max(need, policy.min_control_passes)
            raise BadInput(
                f"critical slice {name!r} has {n} cases{clustered}; a PASS at τ = {tau:g} and confidence "
                f"{policy.confidence:g} needs at least {needed}: add cases, or set allow_unwinnable = true "
                "in the policy"
            )


def check_safe(policy: Policy, reason: str | None) -> str | None:
    """The reason to store for an unsafe policy; BadInput when an unsafe policy comes without one."""
    if not policy.unsafe:
        return None
    if not reason or not reason.strip():
        raise BadInput(
            f"unsafe policy ({'; '.join(policy.unsafe)}); pass --policy-unsafe-reason TEXT to run on it "
            "anyway (it is stored in the manifest and printed on every report)"
        )
    return reason.strip()
