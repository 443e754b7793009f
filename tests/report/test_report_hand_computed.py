"""Every number of the fixed run's report JSON against hand computation from the fixture's sets.

The reference below loops over cases in plain Python (no code shared with kvgate's statistics); bounds
and McNemar come from statsmodels, the exceedance p-value from scipy's binomial.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.report_fixed_run import (
    AA_FLIPS_TO_FAIL,
    AA_FLIPS_TO_PASS,
    ARMS,
    CONTROL_ERRORS,
    CONTROL_FAILS,
    ERRORS,
    FAILS,
    LOW_CONFIDENCE_PASS,
    RERUNS,
    N,
    ctx,
    depth,
    task,
)
from scipy.stats import binom
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from kvgate.cli import cli

TAU, CONFIDENCE, MIN_PASSES = 0.1, 0.9, 10
SLICE_TAU = {"ctx_bucket=1k": 0.2}
GATED = {"all", "task=passkey", "ctx_bucket=1k", "critical"}
LOSSLESS = {"offload-host", "prefix-reuse"}
SLICES = [
    "all", "task=needle", "task=passkey", "ctx_bucket=512", "ctx_bucket=1k", "depth_bucket=start",
    "depth_bucket=end", "task=needle/ctx_bucket=512", "task=needle/ctx_bucket=1k",
    "task=passkey/ctx_bucket=512", "task=passkey/ctx_bucket=1k", "critical",
]  # fmt: skip


def report_json(run_dir: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["report", str(run_dir), "--format", "json", *args])
    assert result.exit_code in (0, 1, 3, 4), result.output
    data: dict[str, Any] = json.loads(result.stdout)
    assert data["exit_code"] == result.exit_code
    return data


def members(name: str) -> list[int]:
    if name == "all":
        return list(range(N))
    if name == "critical":
        return list(range(6))
    terms = dict(t.split("=") for t in name.split("/"))
    label = {"task": task, "ctx_bucket": ctx, "depth_bucket": depth}
    return [i for i in range(N) if all(label[c](i) == v for c, v in terms.items())]


def control_pass(i: int) -> bool:
    return i not in CONTROL_FAILS


def replicate_pass(i: int) -> bool:
    return (control_pass(i) and i not in AA_FLIPS_TO_FAIL) or i in AA_FLIPS_TO_PASS


def bounds(k: int, n: int) -> tuple[float | None, float | None]:
    if n == 0:
        return None, None
    lower, upper = proportion_confint(k, n, alpha=2 * (1 - CONFIDENCE), method="beta")
    return float(lower), float(upper)


def expected_slice(arm: str, name: str) -> dict[str, Any]:
    usable = [i for i in members(name) if i not in CONTROL_ERRORS and i not in ERRORS.get(arm, set())]
    cand = {i: i not in FAILS[arm] for i in usable}
    cio = [i for i in usable if control_pass(i) and not cand[i]]
    cop = [i for i in usable if not control_pass(i) and cand[i]]
    n = sum(control_pass(i) for i in usable)
    k = len(cio)
    tau = SLICE_TAU.get(name, TAU)
    lower, upper = bounds(k, n)
    reruns = RERUNS.get(arm, {})
    reproducible = sum(1 for i in cio if reruns.get(i, "none") is False)
    flaky = sum(1 for i in cio if reruns.get(i) is True)
    critical = arm in LOSSLESS or name in ("critical", "task=passkey")
    aa = [i for i in usable if control_pass(i)]  # the paired A/A test's control passes
    flips = sum(not replicate_pass(i) for i in aa)
    return {
        "n_pairs": len(usable),
        "control_passes": n,
        "cache_induced_failures": k,
        "candidate_only_passes": len(cop),
        "both_fail": sum(1 for i in usable if not control_pass(i) and not cand[i]),
        "candidate_failures": sum(1 for i in usable if not cand[i]),
        "cfr": k / n if n else None,
        "cfr_lower": lower,
        "cfr_upper": upper,
        "tau": tau,
        "exceed_p": float(binom.sf(k - 1, n, tau)) if n else None,
        "mcnemar_p": mcnemar([[0, k], [len(cop), 0]], exact=True).pvalue if k + len(cop) else None,
        "total_failure_rate": sum(1 for i in usable if not cand[i]) / len(usable) if usable else None,
        "aa_pairs": len(aa),
        "aa_flips": flips,
        "aa_flip_rate": flips / len(aa) if aa else None,
        "reproducible_failures": reproducible,
        "flaky_failures": flaky,
        "critical": critical,
        "gated": name in GATED,
        "role": "gate" if name in GATED else "signal",
        "labels": {} if name in ("all", "critical") else dict(t.split("=") for t in name.split("/")),
    }


@pytest.fixture(scope="module")
def report(fixed_run: Path) -> dict[str, Any]:
    return report_json(fixed_run)


def test_every_slice_number_equals_hand_computation(report: dict[str, Any]) -> None:
    assert [a["arm"] for a in report["arms"]] == ARMS
    for arm in report["arms"]:
        assert [s["slice"] for s in arm["slices"]] == SLICES
        for s in arm["slices"]:
            expected = expected_slice(arm["arm"], s["slice"])
            for key, value in expected.items():
                if isinstance(value, float):
                    assert s[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (arm["arm"], s["slice"], key)
                else:
                    assert s[key] == value, (arm["arm"], s["slice"], key)
            assert s["arm"] == arm["arm"]


def test_the_all_slice_of_snapkv_written_out(report: dict[str, Any]) -> None:
    s = report["arms"][0]["slices"][0]
    # control passes cases 0–45; snapkv fails 0,1,2,3,30 (cache-induced) and 46 (both fail); passes 47.
    assert (s["n_pairs"], s["control_passes"], s["cache_induced_failures"]) == (48, 46, 5)
    assert (s["candidate_only_passes"], s["both_fail"], s["candidate_failures"]) == (1, 1, 6)
    assert s["cfr"] == 5 / 46 and s["total_failure_rate"] == 6 / 48
    assert (s["aa_flips"], s["aa_pairs"]) == (1, 46)  # of the 46 control passes the replicate loses case 10
    assert s["aa_table"] == {
        "both_pass": 40,
        "candidate_only_fails": 5,
        "replicate_only_fails": 1,
        "both_fail": 0,
    }
    assert s["mcnemar_p"] == pytest.approx(2 * 7 / 64)  # discordant 5 vs 1: 2·P(Bin(6, ½) ≤ 1) = 2·(1 + 6)/64
    assert s["decision"] == "inconclusive"


def test_decisions_of_the_fixed_run(report: dict[str, Any]) -> None:
    """The procedure (tests/gate checks it alone) on the fixed run: snapkv's 4 of 6 critical cases fail
    (exceedance p = P(Bin(6, 0.1) ≥ 4) = 0.00127; gated family of 4 slices that can reach α = 0.1, each
    weighted 0.8/4 beside 7 signals at 0.2/7, so p̃ = 0.00127·(0.8 + 0.2)/0.2 = 0.00635 ≤ 0.1), and the
    replicate loses none of those 6 (discordant 4 vs 0 of 6 pairs, z = 2: the unconditional exact p is the
    largest over ψ of C(6,4)ψ⁴(1 − ψ)²/16 + 6ψ⁵(1 − ψ)/32 + ψ⁶/64, < aa_alpha): a FAIL. The lossless arms'
    critical slice of 6 cases can never pass τ = 10% at 90% (that needs 22), so they stay inconclusive."""
    snapkv = {s["slice"]: s for s in report["arms"][0]["slices"]}
    critical = snapkv["critical"]
    assert critical["exceed_p"] == pytest.approx(float(binom.sf(3, 6, 0.1)))
    assert critical["adjusted_p"] == pytest.approx(float(binom.sf(3, 6, 0.1)) / 0.2)
    psi = np.linspace(0, 1, 100_001)
    unconditional = (15 * psi**4 * (1 - psi) ** 2 / 16 + 6 * psi**5 * (1 - psi) / 32 + psi**6 / 64).max()
    assert critical["aa_p"] == pytest.approx(unconditional, rel=1e-3)
    assert critical["decision"] == "fail"
    assert critical["passes_needed"] is None and snapkv["all"]["decision"] == "inconclusive"
    offload = {s["slice"]: s for s in report["arms"][3]["slices"]}["critical"]
    assert (offload["cache_induced_failures"], offload["decision"], offload["passes_needed"]) == (
        0, "inconclusive", 22,
    )  # fmt: skip


def test_arm_level_numbers(report: dict[str, Any]) -> None:
    arms = {a["arm"]: a for a in report["arms"]}
    snapkv = arms["snapkv-50"]
    assert (snapkv["reproducible_failures"], snapkv["flaky_failures"], snapkv["unconfirmed_failures"]) == (
        2,
        1,
        2,
    )
    # failures (score 2.0) beat 41 passes (0.5) and lose to one (3.0): U = 6·41 of 6·42 pairs
    assert snapkv["confidence_auc"] == pytest.approx(246 / 252)
    assert snapkv["confidence_auc_n"] == {"failures": 6, "passes": 42}
    d = snapkv["divergence"]
    assert (d["n_pairs"], d["diverged"], d["diverged_and_failed"], d["median"]) == (48, 7, 6, 1.0)
    assert d["bin_edges"] == list(range(9))
    assert d["failed"] == [2, 2, 1, 1, 0, 0, 0, 0] and d["passed"] == [0, 0, 0, 0, 0, 0, 0, 1]
    assert LOW_CONFIDENCE_PASS == {"snapkv-50": 10}
    composite = arms["snapkv-50+fp8"]
    attribution = composite["attribution"]
    assert {k: attribution[k] for k in ("parts", "missing_parts", "failures", "classes")} == {
        "parts": [{"arm": "snapkv-50", "kind": "eviction"}, {"arm": "fp8-e4m3", "kind": "quantize"}],
        "missing_parts": [],
        "failures": 6,
        "classes": {"eviction": 2, "quantize": 1, "both": 1, "interaction": 2, "unattributed": 0},
    }
    interaction = attribution["intervals"]["interaction"]
    lower, upper = proportion_confint(2, 46, alpha=1 - CONFIDENCE, method="beta")
    assert attribution["control_passes"] == 46 and interaction["rate"] == pytest.approx(2 / 46)
    assert (interaction["lower"], interaction["upper"]) == (pytest.approx(lower), pytest.approx(upper))
    assert arms["fp8-e4m3"]["attribution"] is None
    assert [(a["arm"], a["decision"]) for a in report["arms"]] == [
        ("snapkv-50", "fail"),
        ("fp8-e4m3", "inconclusive"),
        ("snapkv-50+fp8", "inconclusive"),
        ("offload-host", "inconclusive"),
        ("prefix-reuse", "error"),
    ]
    assert arms["snapkv-50"]["reason"] == "slice critical failed"
    assert arms["prefix-reuse"]["engine_errors"] == 1
    assert arms["offload-host"]["lossless"] and not arms["fp8-e4m3"]["lossless"]
    points = arms["snapkv-50"]["by_context"]
    assert [
        (p["bucket"], p["prompt_tokens"], p["cache_induced_failures"], p["control_passes"]) for p in points
    ] == [
        ("512", 500.0, 3, 23),
        ("1k", 1000.0, 2, 23),
    ]
    assert (report["decision"], report["exit_code"]) == ("fail", 1)


def test_run_level_numbers(report: dict[str, Any]) -> None:
    control = dict(report["control"])
    stress = control.pop("stress")
    # The fixed run was made without a [load] schedule: nothing was aborted, re-sent or counted.
    assert stress["counts"] is None and stress["boundary_cases"] is None
    assert stress["load"]["abort_percent"] == 0 and stress["load"]["concurrency"] == 1
    assert control == {
        "arm": "full",
        "n": 48,
        "passes": 46,
        "engine_errors": 0,
        "pass_rate": 46 / 48,
    }
    floor = report["noise_floor"]
    _, upper = bounds(1, 46)
    assert floor == {
        "n_pairs": 48,
        "flips": 2,
        "flip_rate": 2 / 48,
        "control_passes": 46,
        "replicate_failures": 1,
        "aa_cfr": 1 / 46,
        "aa_cfr_upper": pytest.approx(upper),
        "token_divergences": 1,
    }
    assert all(c["ok"] for c in report["isolation"])
    assert report["policy"]["changed_reason"] is None
    assert report["run"]["n_cases"] == 48 and report["run"]["git_commit"] == "0" * 40
    assert report["slice_columns"] == ["task", "ctx_bucket", "depth_bucket"]
