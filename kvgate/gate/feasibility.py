"""Before a run: can every critical slice ever pass, and is the policy above the safety floor?

A gated slice passes only when its exact upper bound reaches τ with at least min_control_passes control
passes. With no failure at all, the bound on G effective cases (its clusters) is 1 − α^(1/G), so a slice
needs G ≥ ln α / ln(1 − τ) clusters (59 at τ = 5%, 95%) and n ≥ min_control_passes cases even if the
control passes every one. A critical slice smaller than that can never pass: the arm would be
inconclusive forever, so the run is refused before generating (unless `allow_unwinnable = true`).

With `expected_control_pass_rate = r` declared, the pre-run check counts what the control is expected to
pass: n·r cases in Σ_g (1 − (1 − r)^m_g) clusters (a cluster of m_g cases counts once any of them
passes). After the control's pass the same counts are taken on the passes it produced
(`check_control_winnable`), before any candidate generates.
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


def _needed(policy: Policy, name: str) -> int:
    """Control passes (in distinct clusters) a PASS of slice `name` needs; BadInput when none suffice."""
    tau = policy.tau_for(name)
    need = clusters_needed(tau, policy.confidence)
    if need is None:
        raise BadInput(
            f"critical slice {name!r} has τ = 0: no number of cases can pass it; "
            "set allow_unwinnable = true in the policy if it is only meant to fail"
        )
    return need


def _expected_clusters(keys: list[str], rate: float) -> float:
    """Expected clusters holding at least one control pass when each case passes with `rate`."""
    sizes: dict[str, int] = {}
    for key in keys:
        sizes[key] = sizes.get(key, 0) + 1
    return sum(1.0 - (1.0 - rate) ** m for m in sizes.values())


def check_winnable(policy: Policy, cases: Iterable[tuple[Mapping[str, str], bool, str]]) -> None:
    """BadInput when `all` has τ = 0 under a bound rule (no count of cases passes it: `kvgate run --tau 0`
    ran, to be told "more cases would settle it"), else naming the first critical slice too small to
    ever pass. `cases`: per case, its slice labels, critical flag and cluster key (the policy's cluster;
    a case's own id when it has none)."""
    if policy.allow_unwinnable:
        return
    if policy.rule != "point" and clusters_needed(policy.tau_for(ALL), policy.confidence) is None:
        raise BadInput(
            "policy τ = 0: no number of cases can pass the gate (the upper bound on a CFR stays above 0); "
            "give a τ above 0 (--tau 0.01), or set allow_unwinnable = true in the policy if it is only "
            "meant to fail"
        )
    rows = list(cases)
    rate = policy.expected_control_pass_rate
    for name in critical_slices(policy, any(c for _, c, _ in rows)):
        inside = [key for labels, critical, key in rows if slice_members(name, labels, critical)]
        n, g = len(inside), len(set(inside))
        need = _needed(policy, name)
        clustered = f" in {g} clusters" if g < n else ""
        expected = ""
        n_exp, g_exp = float(n), float(g)
        if rate is not None and rate < 1:
            n_exp, g_exp = n * rate, _expected_clusters(inside, rate)
            in_g = f" in ≈{g_exp:.0f} clusters" if g < n else ""
            expected = f"; at the expected control pass rate {rate:g} about {n_exp:.0f} control passes{in_g}"
        if g_exp < need or n_exp < policy.min_control_passes:
            needed = max(need, policy.min_control_passes)
            raise BadInput(
                f"critical slice {name!r} has {n} cases{clustered}{expected}; a PASS at "
                f"τ = {policy.tau_for(name):g} and confidence {policy.confidence:g} needs at least {needed}: "
                "add cases, or set allow_unwinnable = true in the policy"
            )


def check_control_winnable(
    policy: Policy, cases: Iterable[tuple[Mapping[str, str], bool, str, bool | None]]
) -> None:
    """After the control's pass: BadInput naming the first critical slice whose control passes cannot
    carry a PASS. `cases`: per case, its slice labels, critical flag, cluster key and whether the control
    passed it (None: not generated yet, counted as a pass that may still come)."""
    if policy.allow_unwinnable:
        return
    rows = list(cases)
    for name in critical_slices(policy, any(c for _, c, _, _ in rows)):
        inside = [(key, ok) for labels, critical, key, ok in rows if slice_members(name, labels, critical)]
        passes = [key for key, passed in inside if passed]
        could = [key for key, passed in inside if passed is not False]
        n, g, pending = len(passes), len(set(passes)), len(could) - len(passes)
        need = _needed(policy, name)
        if len(set(could)) >= need and len(could) >= policy.min_control_passes:
            continue
        clusters = len({key for key, _ in inside}) < len(inside)
        in_g = f" in {g} distinct clusters" if clusters else ""
        later = f" ({pending} not generated yet, counted as passes)" if pending else ""
        stop = "this look's candidates" if pending else "any candidate generates"
        parts = [f"{need} control passes" + (" in distinct clusters" if clusters else "")]
        if policy.min_control_passes > need:
            parts.append(f"{policy.min_control_passes} (min_control_passes)")
        raise BadInput(
            f"critical slice {name!r}: the control passed {n} of its {len(inside)} cases{in_g}{later}; "
            f"a PASS at τ = {policy.tau_for(name):g} and confidence {policy.confidence:g} needs at least "
            f"{' and '.join(parts)}: the run stops before {stop}; add cases, or set allow_unwinnable = true "
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
