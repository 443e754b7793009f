"""The gate's error promise on the workload shapes a release team cannot choose: unequal clusters with
per-case and per-cluster defects, a regression hidden at the longest contexts, a noisy A/A replicate,
and the anytime sequential mode. Each point is its own Monte Carlo here (failures drawn in this file,
decided by gate.procedure), 10,000 runs, checked within three Monte Carlo standard errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.gate_workloads import Workloads

from kvgate.gate.decision import FAIL, PASS
from kvgate.gate.policy import Policy
from kvgate.gate.procedure import Clusters, Family, SliceCounts, decide_arm
from kvgate.gate.simulate import Scenario, operating
from kvgate.report.analysis.gate_structure import gate_structure
from kvgate.report.analysis.run_data import read_workload_cases

RUNS = 10_000
ALPHA = 0.05
SE = float(np.sqrt(ALPHA * (1 - ALPHA) / RUNS))
SHAPES = {
    "10x20+100x1": [(10, 20), (100, 1)],
    "1x60+140x1": [(1, 60), (140, 1)],
    "80x1+20x4+5x16": [(80, 1), (20, 4), (5, 16)],
    "16x4+228x1": [(16, 4), (228, 1)],  # the shipped reuse suite's groups beside single cases
}
pytestmark = pytest.mark.slow


def sizes_of(shape: list[tuple[int, int]]) -> np.ndarray:
    return np.array([size for count, size in shape for _ in range(count)], dtype=np.int64)


def draw(sizes: np.ndarray, rate: float, per_cluster: bool, rng: np.random.Generator) -> np.ndarray:
    """(RUNS, G) failures per cluster: whole clusters hit at `rate`, or each case at `rate`."""
    if per_cluster:
        return (rng.random((RUNS, sizes.size)) < rate) * sizes
    return rng.binomial(np.broadcast_to(sizes, (RUNS, sizes.size)), rate)


def decide(sizes: np.ndarray, failed: np.ndarray, policy: Policy) -> np.ndarray:
    """Arm codes of `all` alone for every run: its clusters of more than one case go in as slots."""
    multi = sizes >= 2
    n = int(sizes.sum())
    counts = SliceCounts(
        failed.sum(axis=1, keepdims=True),
        np.full((RUNS, 1), n),
        np.full((RUNS, 1), sizes.size),
        grouped=Clusters(np.zeros(int(multi.sum()), dtype=np.int64), sizes[multi], failed[:, multi]),
    )
    return decide_arm(counts, Family(np.array([policy.tau]), np.array([True])), policy, with_bounds=False).arm


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("per_cluster", [False, True], ids=["per-case", "per-cluster"])
def test_errors_at_tau_stay_within_alpha_on_unequal_clusters(shape: str, per_cluster: bool) -> None:
    policy = Policy(min_control_passes=1)
    sizes = sizes_of(SHAPES[shape])
    arm = decide(sizes, draw(sizes, policy.tau, per_cluster, np.random.default_rng(11)), policy)
    false_accept, false_fail = np.mean(arm == PASS), np.mean(arm == FAIL)
    assert false_accept <= ALPHA + 3 * SE and false_fail <= ALPHA + 3 * SE, (false_accept, false_fail)


@pytest.mark.parametrize("rho", [0.3, 0.7])
@pytest.mark.parametrize("shape", ["10x20+100x1", "1x60+140x1"])
def test_errors_hold_at_intermediate_correlation(shape: str, rho: float) -> None:
    """Failures inside a cluster neither independent nor whole: each cluster's rate drawn from a beta of
    mean τ and ICC ρ. The estimated bound must cover ρ, or the Berger–Boos β pays for the miss."""
    policy = Policy(min_control_passes=1)
    sizes = sizes_of(SHAPES[shape])
    rng = np.random.default_rng(13)
    scale = 1 / rho - 1
    rate = rng.beta(policy.tau * scale, (1 - policy.tau) * scale, size=(RUNS, sizes.size))
    arm = decide(sizes, rng.binomial(np.broadcast_to(sizes, rate.shape), rate), policy)
    assert np.mean(arm == PASS) <= ALPHA + 3 * SE and np.mean(arm == FAIL) <= ALPHA + 3 * SE


def test_power_with_per_case_defects_reaches_90_percent_under_the_default() -> None:
    """Independent failures spread over ten clusters of 20 beside 100 single cases: the clusters' betting
    e-value (their shares vary little) buys back the power the worst case loses — ≥ 90% at 2τ under the
    default `defects = "estimate"`, against 95.6% for 300 independent cases (declared `per_case`)."""
    sizes = sizes_of(SHAPES["10x20+100x1"])
    failed = draw(sizes, 0.10, False, np.random.default_rng(12))
    estimate = np.mean(decide(sizes, failed, Policy(min_control_passes=1)) == FAIL)
    worst = np.mean(decide(sizes, failed, Policy(min_control_passes=1, defects="per_cluster")) == FAIL)
    independent = np.mean(decide(sizes, failed, Policy(min_control_passes=1, defects="per_case")) == FAIL)
    assert worst + 0.5 < estimate < independent, (worst, estimate, independent)
    assert estimate >= 0.90 and independent > 0.9


def test_a_regression_at_the_longest_contexts_never_passes(workloads: Workloads) -> None:
    """1,500-case ruler, every failure in ctx_bucket=4k at 1.5τ there (τ/2 overall): the strata hold the
    PASS back (it passed 83% of the time when the buckets were only signals)."""
    cases = read_workload_cases(str(workloads["ruler-1500"]))
    policy = Policy()
    op = operating(
        gate_structure(cases, policy), policy, RUNS, seed=5, scenario=Scenario(defects_in="ctx_bucket=4k")
    )
    assert op.at_half_tau.passes <= ALPHA
    unstratified = Policy(strata=())
    before = operating(
        gate_structure(cases, unstratified),
        unstratified,
        2_000,
        seed=5,
        scenario=Scenario(defects_in="ctx_bucket=4k"),
    )
    assert before.at_half_tau.passes > 0.5  # what one aggregate hides


def test_a_noisy_replicate_is_compared_pairwise(workloads: Workloads) -> None:
    """150-case ruler (strata off: its buckets of 50 cannot pass alone), A/A replicate flipping 5% of the
    control's passes: a clean arm passes, errors stay within α, the power at 2τ is ≥ 65% (the paired
    unconditional test at the default aa_alpha); a replicate that never flips is modelled."""
    cases = read_workload_cases(str(workloads["ruler"]))
    policy = Policy(strata=())
    structure = gate_structure(cases, policy)
    noisy = operating(structure, policy, RUNS, seed=6, scenario=Scenario(aa_rate=0.05))
    assert noisy.at_zero.passes >= 0.8  # the noise floor is a bound now, not a point estimate
    assert noisy.false_accept <= ALPHA + 3 * SE and noisy.false_fail <= ALPHA + 3 * SE
    assert noisy.power >= 0.65, noisy.power
    clean = operating(structure, policy, RUNS, seed=6, scenario=Scenario(aa_rate=0.0, replicate=True))
    assert clean.false_fail <= ALPHA + 3 * SE and clean.power > noisy.power


def test_anytime_mode_stops_early_at_cfr_zero_with_the_same_errors(workloads: Workloads) -> None:
    cases = read_workload_cases(str(workloads["ruler-1500"]))
    anytime = Policy(strata=(), sequential=True, anytime=True, look_every=10)
    looks = Policy(strata=(), sequential=True, look_every=100)
    structure = gate_structure(cases, anytime)
    a = operating(structure, anytime, 2_000, seed=8)
    b = operating(structure, looks, 2_000, seed=8)
    assert a.at_zero.generated <= 120 < b.at_zero.generated
    se = float(np.sqrt(ALPHA * (1 - ALPHA) / 2_000))
    assert a.false_accept <= ALPHA + 3 * se and a.false_fail <= ALPHA + 3 * se
