"""The gate's procedure on one slice and on small families: pass when the upper bound ≤ τ, fail when the
adjusted exceedance test rejects; too few control passes withhold a PASS, never a FAIL; the A/A
replicate can withhold a FAIL; the overall outcome and exit codes."""

from __future__ import annotations

import numpy as np
import pytest

from kvgate.gate.decision import EXIT_CODES, FAIL, INCONCLUSIVE, PASS, combine
from kvgate.gate.policy import Policy
from kvgate.gate.procedure import NUISANCE_SHARE, Clusters, Family, SliceCounts, decide_arm
from kvgate.stats.intervals import cp_lower, cp_upper

POLICY = Policy(tau=0.05, confidence=0.95, min_control_passes=20)


def one_slice(k: int, n: int, policy: Policy = POLICY, aa: tuple[int, int] | None = None) -> int:
    counts = SliceCounts(
        np.array([k]), np.array([n]), np.array([n]),
        None if aa is None else np.array([aa[0]]), None if aa is None else np.array([aa[1]]),
    )  # fmt: skip
    return int(decide_arm(counts, Family(np.array([policy.tau]), np.array([True])), policy).codes[0])


@pytest.mark.parametrize("n", [20, 59, 60, 100, 300, 1000])
def test_a_lone_gated_slice_is_the_exact_bounds_themselves(n: int) -> None:
    for k in range(0, n + 1, max(1, n // 50)):
        upper, lower = cp_upper(k, n, 0.95), cp_lower(k, n, 0.95)
        assert upper is not None and lower is not None
        expected = PASS if upper <= 0.05 else FAIL if lower > 0.05 else INCONCLUSIVE
        assert one_slice(k, n) == expected, (k, n)


def test_smallest_n_that_can_pass_at_tau_5_percent() -> None:
    # 0 failures pass once (1 − τ)^n ≤ 1 − c: n ≥ ln(0.05)/ln(0.95) ≈ 58.4.
    assert one_slice(0, 58) == INCONCLUSIVE
    assert one_slice(0, 59) == PASS


def test_too_few_control_passes_withhold_a_pass_but_not_a_fail() -> None:
    policy = Policy(tau=0.5, min_control_passes=20)
    assert one_slice(0, 19, policy) == INCONCLUSIVE  # the bound alone would pass it
    assert one_slice(0, 0, policy) == INCONCLUSIVE
    assert one_slice(18, 18, POLICY) == FAIL  # 18 of 18: lower bound 0.85, fails at any n


def test_point_rule_compares_the_estimate() -> None:
    policy = Policy(tau=0.1, rule="point", min_control_passes=10)
    assert one_slice(1, 10, policy) == PASS
    assert one_slice(2, 10, policy) == FAIL


def test_a_candidate_within_the_aa_noise_is_not_failed() -> None:
    # 11 of 94 control passes lost by the candidate (11.7%), 7 of 94 by the A/A replicate (7.4%): above
    # τ = 5% by the bound; against the replicate (no joint table: 11 vs 7 discordant) the one-sided
    # unconditional exact p is 0.27 — under the default aa_alpha 0.3 a FAIL, not under a declared 0.05.
    assert one_slice(11, 94) == FAIL
    assert one_slice(11, 94, aa=(7, 94)) == FAIL
    assert one_slice(11, 94, Policy(tau=0.05, aa_alpha=0.05), aa=(7, 94)) == INCONCLUSIVE
    assert one_slice(10, 94, aa=(8, 94)) == INCONCLUSIVE  # 10 vs 8: p 0.34
    assert one_slice(30, 94, Policy(tau=0.05, aa_alpha=0.05), aa=(7, 94)) == FAIL  # far above it
    margin = Policy(tau=0.05, aa_margin=0.3)
    assert one_slice(30, 94, margin, aa=(0, 94)) == FAIL  # 31.9% − 0% > 30 points
    assert one_slice(25, 94, margin, aa=(0, 94)) == INCONCLUSIVE  # 26.6% − 0% ≤ 30 points


def test_aa_noise_floor_above_tau_makes_the_arm_inconclusive() -> None:
    counts = SliceCounts(np.array([0]), np.array([200]), np.array([200]), np.array([20]), np.array([200]))
    v = decide_arm(counts, Family(np.array([0.05]), np.array([True])), POLICY)
    assert v.codes[0] == PASS and bool(v.noisy) and int(v.arm) == INCONCLUSIVE


def test_signals_fail_the_arm_only_on_a_clear_regression() -> None:
    # `all` passes (0 of 600); a signal slice of 18 with 18 failures fails the arm; one with 3 of 60 doesn't.
    family = Family(np.array([0.05, 0.05, 0.05]), np.array([True, False, False]))
    clear = SliceCounts(np.array([18, 18, 0]), np.array([1200, 18, 60]), np.array([1200, 18, 60]))
    v = decide_arm(clear, family, POLICY)
    assert list(v.codes) == [PASS, FAIL, INCONCLUSIVE] and int(v.arm) == FAIL
    mild = SliceCounts(np.array([3, 0, 3]), np.array([1200, 18, 60]), np.array([1200, 18, 60]))
    v = decide_arm(mild, family, POLICY)
    assert list(v.codes) == [PASS, INCONCLUSIVE, INCONCLUSIVE] and int(v.arm) == PASS
    off = decide_arm(clear, family, Policy(signal_alpha=0.0))
    assert off.codes[1] == INCONCLUSIVE  # signal_alpha = 0: signals never fail


def test_the_gated_family_shares_alpha_and_unreachable_slices_take_none() -> None:
    # Two gated slices: `all` and a critical slice of 1 case at τ = 10% (τ^1 ≥ α: can never fail, left out).
    family = Family(np.array([0.05, 0.10]), np.array([True, True]))
    v = decide_arm(SliceCounts(np.array([10, 1]), np.array([100, 1]), np.array([100, 1])), family, POLICY)
    assert np.isnan(v.adjusted_p[1]) and v.level[1] == 0
    assert v.level[0] == pytest.approx(0.05)


def test_clusters_widen_the_bound() -> None:
    # 64 control passes in 16 clusters of 4 with no failure: nothing bounds the ICC, so the gate takes the
    # worst case (ρ = 1, a defect fails whole clusters): P(no failure) = 0.95^16, and β of α is spent.
    family = Family(np.array([0.05]), np.array([True]))
    alone = decide_arm(SliceCounts(np.array([0]), np.array([64]), np.array([64])), family, POLICY)
    sixteen = Clusters(np.zeros(16, dtype=np.int64), np.full(16, 4), np.zeros(16, dtype=np.int64))
    grouped = decide_arm(
        SliceCounts(np.array([0]), np.array([64]), np.array([16]), grouped=sixteen), family, POLICY
    )
    assert alone.codes[0] == PASS and grouped.codes[0] == INCONCLUSIVE
    assert float(grouped.rho) == 1.0 and grouped.design_effect[0] == pytest.approx(4.0)
    assert grouped.upper[0] == pytest.approx(1 - (0.05 * (1 - NUISANCE_SHARE)) ** (1 / 16), rel=1e-6)
    per_case = decide_arm(
        SliceCounts(np.array([0]), np.array([64]), np.array([16]), grouped=sixteen), family,
        Policy(defects="per_case"),
    )  # fmt: skip
    assert per_case.codes[0] == PASS  # declared independent: the 64 cases count alone


def test_failures_spread_over_clusters_bound_the_icc() -> None:
    # 40 clusters of 5: one failure in each looks independent; 8 whole clusters look correlated.
    family = Family(np.array([0.05]), np.array([True]))
    spread = np.array([1] * 40)
    whole = np.array([5] * 8 + [0] * 32)
    for failed, low in ((spread, True), (whole, False)):
        slots = Clusters(np.zeros(40, dtype=np.int64), np.full(40, 5), failed)
        v = decide_arm(
            SliceCounts(np.array([failed.sum()]), np.array([200]), np.array([40]), grouped=slots),
            family,
            POLICY,
        )
        assert (float(v.rho) < 0.3) == low and v.codes[0] == FAIL


def test_a_lone_cluster_never_decides_under_estimate() -> None:
    """20 requests behind one system prompt (one cluster, no single case): whatever fails, the default
    neither passes nor fails the arm — one cluster cannot tell per-case from whole-cluster defects
    (docs/gate.md): even 20 of 20 failing leave its betting FAIL p-value above α."""
    family = Family(np.array([0.05]), np.array([True]))
    k = np.arange(21)
    one = Clusters(np.zeros(1, dtype=np.int64), np.full((21, 1), 20), k[:, None])
    v = decide_arm(
        SliceCounts(k[:, None], np.full((21, 1), 20), np.ones((21, 1)), grouped=one), family, POLICY
    )
    assert (v.codes[:, 0] == INCONCLUSIVE).all()
    assert (v.exceed_p[:, 0] > 0.05).all() and (v.lower[:, 0] == 0).all()


def test_combine_and_exit_codes() -> None:
    assert combine(["pass", "error", "fail", "inconclusive"]) == "fail"
    assert combine(["pass", "error", "inconclusive"]) == "error"
    assert combine(["pass", "inconclusive"]) == "inconclusive"
    assert combine(["pass", "pass"]) == "pass"
    assert combine([]) == "error"
    assert EXIT_CODES == {"pass": 0, "fail": 1, "inconclusive": 3, "error": 4}
