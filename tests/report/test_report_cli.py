"""`kvgate report` through the CLI: formats, the policy-changed path, empty slices, Holm, comparisons,
error paths and the variants of the fixed run that must not pass."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from helpers.cli import kvgate
from helpers.report_fixed_run import POLICY, make_fixed_run, row
from helpers.report_schema import report_json
from statsmodels.stats.multitest import multipletests

from kvgate.cli import cli
from kvgate.rundir.store import reconcile, write_part


def invoke(*args: str) -> Result:
    return kvgate("report", *args)


def as_json(result: Result) -> dict[str, Any]:
    return report_json(result.stdout)


def test_policy_change_without_a_reason_is_refused(fixed_run: Path, tmp_path: Path) -> None:
    policy = tmp_path / "looser.toml"
    policy.write_text(POLICY.replace("tau = 0.1", "tau = 0.3"))
    result = invoke(str(fixed_run), "--policy", str(policy))
    assert result.exit_code == 2
    assert "pass --policy-changed-reason TEXT" in result.output
    assert len(result.output.strip().splitlines()) == 1
    same = tmp_path / "same.toml"
    same.write_text(POLICY)
    assert invoke(str(fixed_run), "--policy", str(same), "--format", "json").exit_code == 1


def test_policy_change_with_a_reason_is_gated_and_the_reason_printed(fixed_run: Path, tmp_path: Path) -> None:
    policy = tmp_path / "looser.toml"
    policy.write_text("tau = 0.3\nconfidence = 0.9\nmin_control_passes = 10\n")
    reason = "review board accepted 30% for this launch"
    table = invoke(str(fixed_run), "--policy", str(policy), "--policy-changed-reason", reason)
    assert f"policy changed after the run: {reason}" in table.output
    result = invoke(
        str(fixed_run), "--policy", str(policy), "--policy-changed-reason", reason, "--format", "json"
    )
    data = as_json(result)
    assert data["policy"]["changed_reason"] == reason
    assert data["policy"]["tau"] == 0.3 and data["policy"]["sha256"] != data["policy"]["declared_sha256"]
    assert f"policy changed after the run: {reason}" in result.stderr
    # τ = 30%: fp8 passes `all`, but the workload's 6 critical cases can never pass (7 by the bound at 90%,
    # 10 by min_control_passes)
    fp8 = {s["slice"]: s for s in data["arms"][1]["slices"]}
    assert (fp8["all"]["decision"], fp8["critical"]["decision"]) == ("pass", "inconclusive")
    assert fp8["critical"]["passes_needed"] == 10 and data["arms"][1]["decision"] == "inconclusive"
    # snapkv: 4 of 6 critical cases at τ = 30% is P(Bin(6, 0.3) ≥ 4) = 0.07 before adjustment: not a FAIL
    assert data["arms"][0]["decision"] == "inconclusive"
    md = invoke(str(fixed_run), "--policy", str(policy), "--policy-changed-reason", reason, "--format", "md")
    assert f"**policy changed after the run:** {reason}" in md.stdout


def test_an_empty_slice_is_never_zero(fixed_run: Path, tmp_path: Path) -> None:
    policy = tmp_path / "missing.toml"
    policy.write_text(
        POLICY.replace('critical = ["task=passkey"]', 'critical = ["task=passkey", "task=summary"]')
        + '"ctx_bucket=64k" = 0.3\n'
    )
    args = [str(fixed_run), "--policy", str(policy), "--policy-changed-reason", "add slices"]
    data = as_json(invoke(*args, "--format", "json"))
    for arm in data["arms"]:
        empty = next(s for s in arm["slices"] if s["slice"] == "task=summary")
        assert (empty["n_pairs"], empty["control_passes"]) == (0, 0)
        assert empty["cfr"] is None and empty["cfr_upper"] is None and empty["cfr_lower"] is None
        assert empty["total_failure_rate"] is None and empty["aa_flip_rate"] is None
        assert empty["decision"] == "inconclusive" and empty["gated"]
        assert all(s["slice"] != "ctx_bucket=64k" for s in arm["slices"])
    assert any("'ctx_bucket=64k' matches no case" in note for note in data["notes"])
    assert data["arms"][3]["decision"] == "inconclusive"  # offload passed before; its critical slice is empty
    table = invoke(*args).output
    line = next(x for x in table.splitlines() if x.startswith(" task=summary"))
    assert "0/0" in line and "—" in line and not re.search(r"(?<![\d.])0\.0%", line)
    md = invoke(*args, "--format", "md").stdout
    assert next(x for x in md.splitlines() if "`task=summary`" in x).count("| — |") >= 3


def test_unknown_slice_column_in_the_policy_is_bad_input(fixed_run: Path, tmp_path: Path) -> None:
    policy = tmp_path / "typo.toml"
    policy.write_text('critical = ["tsak=passkey"]\n')
    result = invoke(str(fixed_run), "--policy", str(policy), "--policy-changed-reason", "x")
    assert result.exit_code == 2
    assert (
        "policy slice 'tsak=passkey'" in result.output
        and "has no slice column 'tsak' (did you mean 'task'?" in result.output
    )


def test_adjusted_figures_gates_by_weighted_holm_signals_by_bh(fixed_run: Path) -> None:
    data = as_json(invoke(str(fixed_run), "--format", "json"))
    slices = data["arms"][0]["slices"]
    alpha = data["policy"]["alpha"]
    signals = [s for s in slices if s["role"] == "signal" and s["exceed_p"] is not None]
    _, q, _, _ = multipletests([s["exceed_p"] for s in signals], method="fdr_bh")
    for s, expected in zip(signals, q, strict=True):
        assert s["q_value"] == pytest.approx(expected) and s["flagged"] == (expected <= alpha)
    assert all(s["q_value"] is None for s in slices if s["role"] == "gate")
    tested = [s for s in slices if s["adjusted_p"] is not None]
    total = sum(s["alpha_share"] for s in tested)
    assert total == pytest.approx(alpha)
    first = min(tested, key=lambda s: s["exceed_p"] / s["alpha_share"])
    assert first["adjusted_p"] == pytest.approx(min(1.0, first["exceed_p"] * alpha / first["alpha_share"]))
    table = invoke(str(fixed_run)).output
    assert "adj p" in table and "signal_alpha=0.2" in table


def test_junit_has_one_case_per_arm_and_slice(fixed_run: Path) -> None:
    data = as_json(invoke(str(fixed_run), "--format", "json"))
    for mode, inconclusive in (("failure", "failure"), ("skip", "skipped")):
        result = invoke(str(fixed_run), "--format", "junit", "--junit-inconclusive", mode)
        assert result.exit_code == 1
        root = ET.fromstring(result.stdout)
        suites = root.findall("testsuite")
        assert [s.get("name") for s in suites] == [a["arm"] for a in data["arms"]]
        for suite, arm in zip(suites, data["arms"], strict=True):
            cases = suite.findall("testcase")
            assert [c.get("name") for c in cases] == ["(arm decision)"] + [s["slice"] for s in arm["slices"]]
            gated = [True] + [s["gated"] for s in arm["slices"]]
            decisions = [arm["decision"]] + [s["decision"] for s in arm["slices"]]
            for case, decision, gate in zip(cases, decisions, gated, strict=True):
                kinds = [child.tag for child in case]
                if not gate and decision != "fail":  # a signal that does not fail the arm gates nothing
                    assert kinds == ["skipped"] and case[0].get("type") == "signal"
                    continue
                element = {"pass": "system-out", "fail": "failure", "error": "error"}.get(
                    decision, inconclusive
                )
                assert kinds == [element]
                if element != "system-out":  # one short line; the details are the body
                    message = case[0].get("message", "")
                    assert "\n" not in message and len(message) <= 160 and case[0].text, message
            code = suite.find("properties/property[@name='exit_code']")
            assert code is not None and code.get("value") == str(arm["exit_code"])
    total = sum(len(a["slices"]) + 1 for a in data["arms"])
    assert root.get("tests") == str(total)
    assert int(root.get("failures", "0")) == len(root.findall(".//failure"))
    assert int(root.get("skipped", "0")) == len(root.findall(".//skipped"))


def test_output_file_and_formats(fixed_run: Path, tmp_path: Path) -> None:
    for fmt in ("table", "md", "html", "json", "junit"):
        out = tmp_path / f"report.{fmt}"
        result = invoke(str(fixed_run), "--format", fmt, "-o", str(out))
        assert result.exit_code == 1, result.output
        assert out.stat().st_size > 500
        assert "\x1b[" not in out.read_text()
    assert report_json((tmp_path / "report.json").read_text())["decision"] == "fail"


def test_compare_two_runs(fixed_run: Path, tmp_path: Path) -> None:
    worse = make_fixed_run(tmp_path / "worse", fails={"offload-host": {10, 47}, "fp8-e4m3": {20, 46}})
    result = invoke(str(worse), "--compare", str(fixed_run), "--format", "json")
    compare = as_json(result)["compare"]
    baseline, current = compare["baseline"]["run_id"], compare["current"]["run_id"]
    assert baseline != current and baseline.split("-")[-1] == current.split("-")[-1]  # same spec, new run
    arms = {a["arm"]: a for a in compare["arms"]}
    offload_all = arms["offload-host"]["slices"][0]
    assert (offload_all["baseline_decision"], offload_all["decision"], offload_all["change"]) == (
        "pass",
        "fail",
        "regression",
    )
    assert offload_all["cfr_delta"] == pytest.approx(1 / 46)
    fp8_all = arms["fp8-e4m3"]["slices"][0]
    assert fp8_all["cfr_delta"] == pytest.approx(1 / 46 - 3 / 46)
    offload = next(r for r in compare["regressions"] if (r["arm"], r["slice"]) == ("offload-host", "all"))
    assert (offload["from"], offload["to"], offload["why"]) == ("pass", "fail", "decision worse")
    assert arms["snapkv-50"]["change"] == "same" and arms["snapkv-50"]["spec_changed"] is False
    table = invoke(str(worse), "--compare", str(fixed_run)).output
    assert "regression" in table and "pass → fail" in table and "+2.2 pp" in table
    md = invoke(str(worse), "--compare", str(fixed_run), "--format", "md").stdout
    assert "### Comparison" in md and "**regression**" in md
    html = invoke(str(worse), "--compare", str(fixed_run), "--format", "html").stdout
    assert "<h2>Comparison</h2>" in html


def test_a_significant_cfr_rise_is_a_regression_even_when_the_decision_stays(tmp_path: Path) -> None:
    """A nightly pair: snapkv fails `all` in both runs, but its CFR rose from 10/46 to 22/46 (+26 points):
    one-sided Fisher p ≈ 0.007 on that gated slice. `--fail-on-regression` exits 1 and every format
    lists the regression first."""
    base = make_fixed_run(tmp_path / "base", fails={"snapkv-50": set(range(10))})
    worse = make_fixed_run(tmp_path / "worse", fails={"snapkv-50": set(range(22))})
    args = [str(worse), "--compare", str(base)]
    data = as_json(invoke(*args, "--format", "json"))
    (first, *_) = data["compare"]["regressions"]
    assert (first["arm"], first["slice"], first["from"], first["to"]) == ("snapkv-50", "all", "fail", "fail")
    assert first["why"] == "CFR rose significantly" and first["cfr_delta"] == pytest.approx(12 / 46)
    assert first["rise_p_holm"] is not None and first["rise_p_holm"] <= 0.1
    assert invoke(*args, "--format", "json", "--fail-on-regression").exit_code == 1
    table = invoke(*args).output
    verdicts_end = table.index("gate: ")
    assert "REGRESSION snapkv-50 / all: CFR 21.7% → 47.8% (+26.1 pp" in table[: verdicts_end + 400]
    md = invoke(*args, "--format", "md").stdout
    assert md.index("REGRESSION snapkv-50 / all") < md.index("### ")
    junit = ET.fromstring(invoke(*args, "--format", "junit").stdout)
    suite = junit.findall("testsuite")[0]
    assert suite.get("name", "").startswith("regressions vs ") and suite.find("testcase/failure") is not None
    twin = shutil.copytree(base, tmp_path / "twin")  # the run itself is refused as its own baseline
    same = invoke(str(base), "--compare", str(twin), "--format", "json", "--fail-on-regression")
    assert as_json(same)["compare"]["regressions"] == [] and same.exit_code == 1  # snapkv fails either way


def test_runs_of_different_workloads_are_not_compared_unless_allowed(
    fixed_run: Path, smoke_workload: Path, tmp_path: Path
) -> None:
    other = CliRunner().invoke(
        cli, ["run", "--engine", "fake", "-w", str(smoke_workload), "-o", str(tmp_path / "runs"), "--quiet"]
    )
    assert other.exit_code == 3, other.output
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if (p / "manifest.json").exists()]
    refused = invoke(str(fixed_run), "--compare", str(run_dir))
    assert refused.exit_code == 2 and "not comparable (pass --allow-different" in refused.output
    assert "differ in workload, model, engine" in refused.output
    allowed = invoke(str(fixed_run), "--compare", str(run_dir), "--allow-different", "--format", "json")
    assert allowed.exit_code == 1 and "compare" in as_json(allowed)


def test_engine_errors_in_the_control_make_every_unfailed_arm_an_error(tmp_path: Path) -> None:
    run = make_fixed_run(tmp_path, control_errors={45})
    data = as_json(invoke(str(run), "--format", "json"))
    decisions = {a["arm"]: a["decision"] for a in data["arms"]}
    assert decisions == {
        "snapkv-50": "fail",
        "fp8-e4m3": "error",
        "snapkv-50+fp8": "error",
        "offload-host": "error",
        "prefix-reuse": "error",
    }
    assert data["control"]["engine_errors"] == 1 and data["arms"][1]["engine_errors"] == 1


def test_cache_hits_in_the_control_are_an_isolation_error(tmp_path: Path) -> None:
    run = make_fixed_run(tmp_path, control_cached=16)
    result = invoke(str(run), "--format", "json")
    data = as_json(result)
    assert result.exit_code == 4
    assert {a["decision"] for a in data["arms"]} == {"error"}
    assert next(c for c in data["isolation"] if c["arm"] == "full")["ok"] is False
    assert "isolation error" in invoke(str(run)).output


def test_an_incomplete_run_is_an_error_not_a_pass(tmp_path: Path) -> None:
    run = make_fixed_run(tmp_path)
    part = next((run / "results" / "offload-host").glob("part-*.parquet"))
    part.unlink()
    reconcile(run, run.name)  # as a resume opening the run does: the deleted part leaves the index
    write_part(run, "offload-host", [row(i, "offload-host", True) for i in range(40)])
    data = as_json(invoke(str(run), "--format", "json"))
    offload = data["arms"][3]
    assert offload["missing_pairs"] == 8 and offload["decision"] == "error"
    assert "resume it" in offload["reason"]


def test_a_case_stored_twice_is_bad_input(fixed_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(fixed_run, copy)
    write_part(copy, "fp8-e4m3", [row(0, "fp8-e4m3", True)])
    result = invoke(str(copy))
    assert result.exit_code == 2
    assert "arm 'fp8-e4m3' replicate 0 stores a case twice" in result.output


@pytest.mark.parametrize("make", ["missing", "not_a_run", "no_workload"])
def test_bad_run_directories_are_one_line_errors(fixed_run: Path, tmp_path: Path, make: str) -> None:
    target = tmp_path / "run"
    if make == "not_a_run":
        target.mkdir()
    if make == "no_workload":
        shutil.copytree(fixed_run, target)
        manifest = json.loads((target / "manifest.json").read_text())
        manifest["workload_path"] = str(tmp_path / "gone.parquet")
        (target / "manifest.json").write_text(json.dumps(manifest))
    result = invoke(str(target))
    assert result.exit_code == 2
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert {"missing": "does not exist", "not_a_run": "not a kvgate run", "no_workload": "does not exist"}[
        make
    ] in (result.output)


def test_several_formats_from_one_call(fixed_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = invoke(str(fixed_run), "--format", "md,junit,json", "-o", str(out))
    assert result.exit_code == 1, result.output
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml", "report.json", "report.md"]
    single = invoke(str(fixed_run), "--format", "md").stdout
    assert (out / "report.md").read_text() == single
    assert report_json((out / "report.json").read_text())["decision"] == "fail"
    for args, message in (
        (["--format", "md,jnuit", "-o", str(out)], "unknown format 'jnuit'; did you mean 'junit'?"),
        (["--format", "md,json"], "several formats need -o DIR"),
    ):
        refused = invoke(str(fixed_run), *args)
        assert refused.exit_code == 2 and message in refused.output


def test_a_matrix_given_as_the_policy_is_named_by_its_path(fixed_run: Path) -> None:
    matrix = Path(__file__).resolve().parents[2] / "treatments" / "default.toml"
    result = invoke(str(fixed_run), "--policy", str(matrix), "--policy-changed-reason", "r")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"kvgate: error: {matrix} is a matrix, not a policy: give it to `kvgate run -m`"
    )
