"""How good is the gate itself? The whole decision procedure, simulated on a workload's slice structure.

A `Structure` is what the gate sees of a workload before any generation: each case's slices, its
cluster, and which slices gate. Each simulated run draws, for every case the control passes, whether the
candidate fails it (at a true CFR p, independently per case, or per cluster: a defect that hits a
cluster fails all of its cases), and whether the A/A replicate fails it (at `aa_rate`). Slice counts are
one sparse product; `gate.procedure.decide_arm` — the code `kvgate report` runs — decides every run at
once. The arm-level shares at p = τ (false accept: PASS; false fail: FAIL), p = τ/2 (false fail) and
p = 2τ (power: FAIL) are the operating characteristics the policy declares, each with its Monte Carlo
standard error √(r(1 − r)/runs). A sequential policy (gate.sequential) is decided look by look, and each
point also reports the mean cases generated before the verdict (at p = 0 and 4τ as well).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from kvgate.errors import BadInput
from kvgate.gate.decision import FAIL, INCONCLUSIVE, PASS
from kvgate.gate.policy import Policy
from kvgate.gate.procedure import Clusters, Family, SliceCounts, decide_arm
from kvgate.gate.sequential import looks, strata, stratified_order

DEFECTS = ("independent", "cluster")
CHUNK = 2_000
"""Simulated runs decided at once (bounds memory: chunk × cases booleans)."""


@dataclass(frozen=True)
class Structure:
    """Slices of N cases: membership (S × N, sparse 0/1), per-case cluster codes, names and roles."""

    membership: sparse.csr_matrix
    clusters: np.ndarray
    """What the gate counts as clusters (the policy's `cluster`)."""
    names: list[str]
    family: Family
    defect_groups: np.ndarray
    """What a "cluster" defect hits as one (the workload's prefix groups, whatever the policy counts)."""

    @property
    def n_cases(self) -> int:
        return int(self.membership.shape[1])

    @staticmethod
    def from_codes(
        groups: list[np.ndarray],
        sizes: list[int],
        clusters: np.ndarray,
        names: list[str],
        family: Family,
        defect_groups: np.ndarray,
    ) -> Structure:
        """From slice groups (per case, a slice code in the group or −1), as analysis.slices gives them."""
        rows, cols, offset = [], [], 0
        for codes, size in zip(groups, sizes, strict=True):
            inside = np.flatnonzero(codes >= 0)
            rows.append(codes[inside] + offset)
            cols.append(inside)
            offset += size
        r, c = np.concatenate(rows), np.concatenate(cols)
        m = sparse.csr_matrix((np.ones(r.size, dtype=np.float32), (r, c)), shape=(offset, clusters.size))
        return Structure(m, np.asarray(clusters, dtype=np.int64), names, family, defect_groups)

    @staticmethod
    def single(n: int, policy: Policy) -> Structure:
        """One slice, `all`, of n independent cases."""
        m = sparse.csr_matrix(np.ones((1, n), dtype=np.float32))
        family = Family(np.array([policy.tau]), np.array([True]))
        return Structure(m, np.arange(n), ["all"], family, np.arange(n))


@dataclass(frozen=True)
class Scenario:
    """How simulated runs are drawn, besides the true CFR."""

    defects: str = "independent"
    """"independent" cases, or "cluster": a defect fails every case of the cluster it hits."""
    control_pass_rate: float = 1.0
    """Each case's chance that the control passes it (1: every case counts)."""
    aa_rate: float = 0.0
    """Each control pass's chance that the A/A replicate fails it."""
    replicate: bool = False
    """Whether the run has an A/A replicate (always, when aa_rate > 0; aa_rate 0 with it: one that never
    flips)."""
    defects_in: str | None = None
    """A slice name: every defect falls in this slice, at the rate that gives the point's overall CFR."""

    def __post_init__(self) -> None:
        if self.defects not in DEFECTS:
            raise ValueError(f"defects must be one of {', '.join(DEFECTS)}")
        if not (0 < self.control_pass_rate <= 1 and 0 <= self.aa_rate <= 1):
            raise ValueError("control_pass_rate must be in (0, 1] and aa_rate in [0, 1]")

    @property
    def has_replicate(self) -> bool:
        return self.replicate or self.aa_rate > 0


@dataclass(frozen=True)
class Rates:
    """Shares of simulated runs in which the arm passes, fails and stays inconclusive at one true CFR."""

    cfr: float
    passes: float
    fails: float
    inconclusive: float
    generated: float
    """Mean cases the arm generated before its verdict (the workload's size for a fixed-n policy)."""


@dataclass(frozen=True)
class Operating:
    """The policy on one structure: arm-level rates at CFR = τ, τ/2 and 2τ."""

    runs: int
    at_tau: Rates
    at_half_tau: Rates
    at_2tau: Rates
    scenario: Scenario
    seed: int
    at_zero: Rates
    at_4tau: Rates

    @property
    def false_accept(self) -> float:
        return self.at_tau.passes

    @property
    def false_fail(self) -> float:
        return self.at_tau.fails

    @property
    def false_fail_half(self) -> float:
        return self.at_half_tau.fails

    @property
    def power(self) -> float:
        return self.at_2tau.fails

    def standard_error(self, rate: float) -> float:
        """Monte Carlo standard error of a simulated share."""
        return float(np.sqrt(max(0.0, rate * (1 - rate)) / self.runs))


class _Counter:
    """Slice counts of simulated runs: control passes, clusters among them, failures."""

    def __init__(self, structure: Structure) -> None:
        self.s = structure
        m = structure.membership.tocoo()
        width = int(structure.clusters.max()) + 1 if structure.clusters.size else 1
        pair = m.row.astype(np.int64) * width + structure.clusters[m.col]
        keys, inverse = np.unique(pair, return_inverse=True)
        multi = np.flatnonzero(np.bincount(inverse, minlength=keys.size) >= 2)
        pairs = sparse.csr_matrix(
            (np.ones(m.col.size, dtype=np.float32), (inverse, m.col)), shape=(keys.size, structure.n_cases)
        )
        self.multi = pairs[multi]
        """(slice, cluster) pairs of more than one case × cases."""
        self.multi_slice = (keys[multi] // width).astype(np.int64)
        self.multi_onehot = np.zeros((multi.size, structure.membership.shape[0]), dtype=np.int64)
        """(multi-case pair, slice): 1 where the pair lies in the slice."""
        self.multi_onehot[np.arange(multi.size), self.multi_slice] = 1

    def slices(self, per_case: np.ndarray) -> np.ndarray:
        """(runs × N) 0/1 → (runs × S) counts."""
        return np.rint(self.s.membership @ per_case.T.astype(np.float32)).T.astype(np.int64)

    def grouped(self, control: np.ndarray, fails: np.ndarray) -> Clusters | None:
        """(runs × N) control passes and failures → per multi-case (slice, cluster) pair, both counts."""
        if self.multi_slice.size == 0:
            return None
        size = np.rint(self.multi @ control.T.astype(np.float32)).T.astype(np.int64)
        failed = np.rint(self.multi @ fails.T.astype(np.float32)).T.astype(np.int64)
        return Clusters(self.multi_slice, size, failed)

    def clusters(self, passes: np.ndarray, grouped: Clusters | None) -> np.ndarray:
        """(runs × S) clusters with at least one control pass, from the slices' control passes and their
        multi-case pairs' (`grouped`): each pass is its own cluster but those of a multi-case pair, which
        count once if the pair holds any."""
        if grouped is None:
            return passes
        size = np.asarray(grouped.size)
        return passes - size @ self.multi_onehot + (size > 0).astype(np.int64) @ self.multi_onehot


def gated_strata(structure: Structure) -> np.ndarray:
    """Per case, the strata of gate.sequential: which gated slices other than `all` hold it."""
    gated = np.flatnonzero(structure.family.gated)
    gated = gated[gated != structure.family.all_index]
    return strata(structure.membership[gated].toarray().T > 0)


def _draw(
    counter: _Counter, cfr: float, runs: int, rng: np.random.Generator, policy: Policy, scenario: Scenario
) -> tuple[np.ndarray, np.ndarray]:
    """Arm decision codes of `runs` simulated runs at true CFR `cfr`, and the cases each generated."""
    s = counter.s
    n_cases = s.n_cases
    control_rate, aa_rate = scenario.control_pass_rate, scenario.aa_rate
    rate = defect_rates(s, cfr, scenario.defects_in)
    schedule = looks(stratified_order(gated_strata(s), 0), policy)
    codes, generated = [], []
    for start in range(0, runs, CHUNK):
        r = min(CHUNK, runs - start)
        control = rng.random((r, n_cases)) < control_rate if control_rate < 1 else np.ones((r, n_cases), bool)
        if scenario.defects == "cluster":
            group_rate = np.zeros(int(s.defect_groups.max()) + 1)
            np.maximum.at(group_rate, s.defect_groups, rate)
            hit = rng.random((r, group_rate.size)) < group_rate
            fails = hit[:, s.defect_groups] & control
        else:
            fails = (rng.random((r, n_cases)) < rate) & control
        replicate_fails = None
        if scenario.has_replicate:
            replicate_fails = (rng.random((r, n_cases)) < aa_rate) & control
        final = np.full(r, -1, dtype=np.int64)
        stop = np.full(r, n_cases, dtype=np.int64)
        for look in schedule:
            seen, level, n_seen = look.selected, look.policy, look.count
            live = np.flatnonzero(final < 0)  # runs still open: only they are counted and decided
            ctl = control[live] & seen
            cand = fails[live] & seen
            n, k, grouped = counter.slices(ctl), counter.slices(cand), counter.grouped(ctl, cand)
            g = counter.clusters(n, grouped)
            aa = {}
            if replicate_fails is not None:
                rep = replicate_fails[live] & seen
                aa = {
                    "aa_failures": counter.slices(rep),
                    "aa_passes": n,
                    "aa_candidate_only": counter.slices(cand & ~rep),
                    "aa_replicate_only": counter.slices(rep & ~cand),
                }
            counts = SliceCounts(k, n, g, grouped=grouped, **aa)
            arm = decide_arm(counts, s.family, level, with_bounds=False).arm
            last = look.index == look.looks
            now = (arm == PASS) | (arm == FAIL) | last
            final[live[now]], stop[live[now]] = arm[now], n_seen
            if (final >= 0).all():
                break
        codes.append(final)
        generated.append(stop)
    return np.concatenate(codes), np.concatenate(generated)


def defect_rates(structure: Structure, cfr: float, defects_in: str | None) -> np.ndarray:
    """Per case, its chance of a defect: the CFR everywhere, or with `defects_in` only in that slice, at
    the rate that puts the same expected share of all cases there (capped at 1)."""
    p = min(max(cfr, 0.0), 1.0)
    if defects_in is None:
        return np.full(structure.n_cases, p)
    if defects_in not in structure.names:
        raise BadInput(f"--defects-in {defects_in!r} is not a slice of this workload")
    inside = structure.membership[structure.names.index(defects_in)].toarray().ravel() > 0
    share = inside.sum() / max(structure.n_cases, 1)
    return np.where(inside, min(1.0, p / share) if share > 0 else 0.0, 0.0)


def _rates(cfr: float, codes: np.ndarray, generated: np.ndarray) -> Rates:
    return Rates(
        cfr=cfr,
        passes=float(np.mean(codes == PASS)),
        fails=float(np.mean(codes == FAIL)),
        inconclusive=float(np.mean(codes == INCONCLUSIVE)),
        generated=float(np.mean(generated)),
    )


def operating(
    structure: Structure,
    policy: Policy,
    runs: int = 10_000,
    seed: int = 0,
    scenario: Scenario | None = None,
) -> Operating:
    """Arm-level operating characteristics of `policy` on `structure` (seeded: same inputs, same figures)."""
    if runs < 1:
        raise ValueError("runs must be ≥ 1")
    scenario = scenario or Scenario()
    counter = _Counter(structure)
    rng = np.random.default_rng(seed)
    tau = policy.tau
    points = [
        _rates(c, *_draw(counter, c, runs, rng, policy, scenario))
        for c in (0.0, tau, tau / 2, 2 * tau, 4 * tau)
    ]
    return Operating(runs, points[1], points[2], points[3], scenario, seed, points[0], points[4])
