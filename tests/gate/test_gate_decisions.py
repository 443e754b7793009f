"""The gate's rules: pass when the upper bound ≤ τ, fail when the lower bound > τ, inconclusive between;
too few control passes is never a pass; Holm makes "fail" harder; the overall outcome and exit codes."""

from __future__ import annotations

import numpy as np
import pytest

from kvgate.gate.decision import EXIT_CODES, FAIL, INCONCLUSIVE, PASS, combine, decide, slice_decision
from kvgate.gate.policy import Policy
from kvgate.stats.intervals import cp_lower, cp_upper

POLICY = Policy(tau=0.05, confidence=0.95, min_control_passes=20)


@pytest.mark.parametrize("n", [20, 59, 60, 100, 300, 1000])
def test_upper_bound_rule_against_the_bounds_themselves(n: int) -> None:
    for k in range(0, n + 1, max(1, n // 50)):
        decision, _ = slice_decision(k, n, 0.05, POLICY)
        upper, lower = cp_upper(k, n, 0.95), cp_lower(k, n, 0.95)
        assert upper is not None and lower is not None
        expected = "pass" if upper <= 0.05 else "fail" if lower > 0.05 else "inconclusive"
        assert decision == expected, (k, n)


def test_smallest_n_that_can_pass_at_tau_5_percent() -> None:
    # 0 failures pass once (1 − τ)^n ≤ 1 − c: n ≥ ln(0.05)/ln(0.95) ≈ 58.4.
    assert slice_decision(0, 58, 0.05, POLICY)[0] == "inconclusive"
    assert slice_decision(0, 59, 0.05, POLICY) == ("pass", "upper bound ≤ τ")


def test_too_few_control_passes_is_inconclusive_even_with_a_clear_estimate() -> None:
    policy = Policy(tau=0.5, min_control_passes=20)
    assert slice_decision(0, 19, 0.5, policy) == ("inconclusive", "19 control passes < min 20")
    assert slice_decision(19, 19, 0.5, policy)[0] == "inconclusive"
    assert slice_decision(0, 0, 0.5, policy)[0] == "inconclusive"


def test_point_rule_compares_the_estimate() -> None:
    policy = Policy(tau=0.1, rule="point", min_control_passes=10)
    assert slice_decision(1, 10, 0.1, policy) == ("pass", "CFR ≤ τ")
    assert slice_decision(2, 10, 0.1, policy) == ("fail", "CFR > τ")


def test_holm_adjusted_pvalues_decide_fail_instead_of_the_lower_bound() -> None:
    k, n = np.array([30, 30]), np.array([200, 200])
    plain = decide(k, n, 0.1, POLICY)
    assert list(plain) == [FAIL, FAIL]
    adjusted = decide(k, n, 0.1, POLICY, fail_pvalues=np.array([0.2, 0.01]))
    assert list(adjusted) == [INCONCLUSIVE, FAIL]
    # a pass stays a pass whatever the adjusted p-value says
    assert decide(np.array([0]), np.array([200]), 0.1, POLICY, fail_pvalues=np.array([0.0]))[0] == PASS


def test_combine_and_exit_codes() -> None:
    assert combine(["pass", "error", "fail", "inconclusive"]) == "fail"
    assert combine(["pass", "error", "inconclusive"]) == "error"
    assert combine(["pass", "inconclusive"]) == "inconclusive"
    assert combine(["pass", "pass"]) == "pass"
    assert combine([]) == "error"
    assert EXIT_CODES == {"pass": 0, "fail": 1, "inconclusive": 3, "error": 4}
