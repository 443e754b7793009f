"""The sequential gate: looks at declared points, α spent across them, cases in a stratified seeded order.

With `sequential = true` the policy declares a look after every `look_every` cases (the last look at the
workload's end), K looks in all. Look j sees the first n_j cases of a seeded order and decides the arm by
`gate.procedure` at level α_j = α·(t_j^ρ − t_{j−1}^ρ), t_j = n_j/N and ρ = `spending_power` (a power
spending function, Lan & DeMets 1983; ρ = 3 spends little early). With `sequential = "anytime"` every look
is at the full α and decides on mixture e-processes instead (stats.eprocess; gate.procedure), whose
errors stay ≤ α by Ville's inequality however many looks there are. A PASS or FAIL at a look is final and
the arm stops generating; the last look decides whatever it finds. Each error of the arm is a union over
looks of errors at level α_j, so it stays ≤ Σ α_j = α under any correlation between looks (conservative:
the looks are correlated, and the price is some power at the last look, which `kvgate simulate
--sequential` shows).

The order keeps the gated slices sampled in proportion: cases are grouped by which critical (non-`all`)
gated slices they belong to, shuffled within the group by the run's seed, and interleaved so every group
is spread evenly over the whole order (a small critical slice is not left to the end).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from kvgate.gate.policy import Policy


def look_ends(n_cases: int, look_every: int) -> np.ndarray:
    """Cases seen at each look: look_every, 2·look_every, …, with the last look at n_cases."""
    if n_cases <= 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.arange(look_every, n_cases, look_every, dtype=np.int64)
    return np.append(ends, n_cases)


def spent_alpha(alpha: float, ends: np.ndarray, power: float) -> np.ndarray:
    """α_j per look: the increments of α·t^power at t_j = ends_j / ends_K; they sum to α."""
    t = np.asarray(ends, dtype=float) / float(ends[-1])
    cumulative = alpha * t**power
    return np.diff(np.concatenate([[0.0], cumulative]))


def stratified_order(strata: np.ndarray, seed: int) -> np.ndarray:
    """A permutation of the cases: shuffled within each stratum (per-case integer code), strata
    interleaved evenly. Case i of a stratum of size m gets the key (rank + u)/m, u uniform in [0, 1)."""
    strata = np.asarray(strata, dtype=np.int64)
    rng = np.random.default_rng(seed)
    noise = rng.random(strata.size)
    keys = np.empty(strata.size)
    for code in np.unique(strata):
        members = np.flatnonzero(strata == code)
        ranks = rng.permutation(members.size)
        keys[members] = (ranks + noise[members]) / members.size
    return np.argsort(keys, kind="stable")


def strata(member: np.ndarray) -> np.ndarray:
    """Per case, a code for the set of gated slices (other than `all`) holding it; `member` is
    (cases × those slices) boolean, possibly with no column."""
    member = np.asarray(member, dtype=bool)
    if member.ndim != 2 or member.shape[1] == 0:
        return np.zeros(member.shape[0], dtype=np.int64)
    _, codes = np.unique(member, axis=0, return_inverse=True)
    return np.asarray(codes, dtype=np.int64).ravel()


@dataclass(frozen=True)
class Look:
    index: int
    """1-based."""
    count: int
    """Cases seen by this look."""
    of_cases: int
    looks: int
    alpha: float
    """α spent at this look."""
    selected: np.ndarray
    """Per case: seen by this look."""
    policy: Policy
    """The declared policy at this look's level (confidence 1 − α_j)."""


def looks(order: np.ndarray, policy: Policy) -> list[Look]:
    """The looks of a sequential policy over cases generated in `order`; one look at full α otherwise."""
    n = int(np.asarray(order).size)
    if not policy.sequential:
        return [Look(1, n, n, 1, policy.alpha, np.ones(n, dtype=bool), policy)]
    ends = look_ends(n, policy.look_every)
    if policy.anytime:  # e-processes: every look at the full α, valid however many there are
        alphas = np.full(ends.size, policy.alpha)
    else:
        alphas = spent_alpha(policy.alpha, ends, policy.spending_power)
    out = []
    for j, (end, a) in enumerate(zip(ends, alphas, strict=True)):
        seen = np.zeros(n, dtype=bool)
        seen[order[:end]] = True
        out.append(
            Look(
                j + 1,
                int(end),
                n,
                len(ends),
                float(a),
                seen,
                replace(
                    policy, confidence=1.0 - float(a), aa_alpha=policy.aa_alpha * float(a) / policy.alpha
                ),
            )
        )
    return out
