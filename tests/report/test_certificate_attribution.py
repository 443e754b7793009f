"""The certificate's attribution AUC: among a candidate's failures, cache-induced (the control passes)
against the model's own (the control fails too), the primary score (mean relative bound) beside the
others and output confidence; written rows, exact values; parts of older versions read as unscored."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from helpers.report_fixed_run import cases, row
from helpers.report_schema import report_json

from kvgate.cli import cli
from kvgate.gate.policy import parse_policy
from kvgate.report.analysis.certificate_attribution import MIN_PER_KIND, certificate_attribution
from kvgate.report.analysis.run_data import CERTIFICATE_SCORES, RESULT_COLUMNS, ArmRows, report_columns
from kvgate.rundir.manifest import build_manifest, write_manifest
from kvgate.rundir.part_index import entry, key_of, read_index, stored_run_id, write_index
from kvgate.rundir.result_part import RESULT_SCHEMA_V1, RESULT_SCHEMA_V2, RESULT_VERSION_KEY
from kvgate.rundir.store import write_part
from kvgate.treatments.matrix import parse_matrix
from kvgate.workload.schema import read_workload, write_workload

ARM = "streaming-50-cert"
CONTROL_FAILS = set(range(0, 14))
OWN = set(range(0, 12))  # the candidate fails these too (12 own failures)
CACHE_INDUCED = set(range(20, 32))  # 12 cache-induced failures
# Bound max per failing case: cache-induced mostly high, own mostly low, one tie across the kinds (0.5).
BOUND_MAX = {i: 0.1 + 0.02 * i for i in OWN} | {i: 0.9 - 0.01 * (i - 20) for i in CACHE_INDUCED}
BOUND_MAX |= {11: 0.5, 31: 0.5, 30: 0.15}
# The primary (mean relative bound) ranks otherwise: two own failures above every cache-induced one.
RELATIVE = {i: 0.01 * i for i in OWN} | {i: 0.3 + 0.01 * (i - 20) for i in CACHE_INDUCED} | {0: 0.9, 1: 0.8}
CAP_SHARE = {i: 0.1 + 0.01 * i for i in OWN | CACHE_INDUCED}
LOGPROB = {i: -1.0 - 0.1 * (i % 4) for i in OWN | CACHE_INDUCED}


def pairwise_auc(pos: list[float], neg: list[float]) -> float:
    """Share of (cache-induced, own) pairs the cache-induced one wins, ties ½: the definition."""
    wins = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def write_run(root: Path, cache_induced: set[int] = CACHE_INDUCED, certified: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    workload_path = root / "w.parquet"
    write_workload(cases(), workload_path, {"suite": "fixed"})
    matrix_path = root / "m.toml"
    matrix_path.write_text(f'[matrix]\ncontrol = "full"\ncandidates = ["{ARM}"]\naa_replicate = false\n')
    workload = read_workload(workload_path)
    manifest = build_manifest(
        workload=workload,
        case_ids=[c.case_id for c in workload.cases],
        model={"name": "fixed-model"},
        engine={"engine": "fake", "version": "1"},
        matrix=parse_matrix(matrix_path),
        policy=parse_policy("tau = 0.05\n", "policy"),
    )
    run_dir = root / "runs" / manifest["run_id"]
    run_dir.mkdir(parents=True)
    write_manifest(run_dir, manifest)
    write_part(run_dir, "full", [row(i, "full", i not in CONTROL_FAILS) for i in range(len(cases()))])
    rows = []
    for i in range(len(cases())):
        fails = i in OWN or i in cache_induced
        extra: dict[str, Any] = {"mean_logprob": LOGPROB.get(i, -0.2)}
        if certified:
            bound, relative = BOUND_MAX.get(i, 0.05), RELATIVE.get(i, 0.01)
            extra |= {
                "certificate_bound_max": bound,
                "certificate_bound_mean": bound / 2 if i != 5 else 0.45,
                "certificate_relative_bound_mean": relative,
                "certificate_relative_estimate_mean": relative / 4 + 0.002 * (i % 7),
                "certificate_cap_share": CAP_SHARE.get(i, 0.0),
            }
        rows.append(row(i, ARM, not fails, **extra))
    write_part(run_dir, ARM, rows)
    return run_dir


def report(run_dir: Path, fmt: str = "json") -> Any:
    result = CliRunner().invoke(cli, ["report", str(run_dir), "--format", fmt])
    assert result.exit_code in (0, 1, 3), result.output
    return report_json(result.stdout) if fmt == "json" else result.stdout


def test_exact_aucs_counts_and_every_format(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path)
    arm = report(run_dir)["arms"][0]
    block = arm["certificate_attribution"]
    cio, own = sorted(CACHE_INDUCED), sorted(OWN)
    assert (block["cache_induced"], block["own"], block["unscored"]) == (12, 12, 0)
    assert (block["score"], block["confidence_score"], block["method"]) == (
        "certificate_relative_bound_mean",
        "-mean_logprob",
        "DeLong",
    )
    expected_primary = pairwise_auc([RELATIVE[i] for i in cio], [RELATIVE[i] for i in own])
    assert block["certificate"]["auc"] == pytest.approx(expected_primary, abs=1e-12)
    assert expected_primary == pytest.approx(1 - 24 / 144)  # the two high own failures beat all 12
    others = block["other_scores"]
    expected_max = pairwise_auc([BOUND_MAX[i] for i in cio], [BOUND_MAX[i] for i in own])
    assert others["certificate_bound_max"]["auc"] == pytest.approx(expected_max, abs=1e-12)
    assert 0.5 < expected_max < 1.0 and expected_max != expected_primary
    mean = {i: BOUND_MAX[i] / 2 if i != 5 else 0.45 for i in OWN | CACHE_INDUCED}
    expected_mean = pairwise_auc([mean[i] for i in cio], [mean[i] for i in own])
    assert others["certificate_bound_mean"]["auc"] == pytest.approx(expected_mean, abs=1e-12)
    estimate = {i: RELATIVE[i] / 4 + 0.002 * (i % 7) for i in OWN | CACHE_INDUCED}
    expected_estimate = pairwise_auc([estimate[i] for i in cio], [estimate[i] for i in own])
    assert others["certificate_relative_estimate_mean"]["auc"] == pytest.approx(expected_estimate, abs=1e-12)
    expected_conf = pairwise_auc([-LOGPROB[i] for i in cio], [-LOGPROB[i] for i in own])
    assert block["output_confidence"]["auc"] == pytest.approx(expected_conf, abs=1e-12)
    assert block["cap_share"] == pytest.approx(np.mean(list(CAP_SHARE.values())))
    for b in (block["certificate"], block["output_confidence"], *others.values()):
        assert b["lower"] <= b["auc"] <= b["upper"] and b["se"] > 0
    text = f"AUC of the mean relative bound (primary) {expected_primary:.2f}"
    for fmt in ("table", "md", "html"):
        out = " ".join(html.unescape(report(run_dir, fmt)).split())  # the table wraps its lines
        assert "12 cache-induced, 12 own" in out and text in out, fmt
        assert f"the bound's max {expected_max:.2f}" in out, fmt


def test_too_few_of_a_kind_gives_no_auc(tmp_path: Path) -> None:
    few = set(range(20, 20 + MIN_PER_KIND - 1))
    run_dir = write_run(tmp_path, cache_induced=few)
    block = report(run_dir)["arms"][0]["certificate_attribution"]
    assert (block["cache_induced"], block["own"]) == (MIN_PER_KIND - 1, 12)
    assert block["certificate"] is block["output_confidence"] is None
    assert set(block["other_scores"].values()) == {None}
    assert "too few failures to tell apart" in report(run_dir, "table")


def test_an_arm_without_certificate_values_has_no_block(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, certified=False)
    data = report(run_dir)
    assert data["arms"][0]["certificate_attribution"] is None
    assert "certificate attribution" not in json.dumps(report(run_dir, "md"))


def arm_rows(passed: list[bool], bound: list[float], logprob: list[float]) -> ArmRows:
    n = len(passed)
    return ArmRows(
        present=np.ones(n, bool),
        passed=np.array(passed),
        error=np.zeros(n, bool),
        mean_logprob=np.array(logprob, dtype=float),
        first_divergence=np.full(n, -1),
        n_prompt_tokens=np.full(n, 100),
        certificate={name: np.array(bound, dtype=float) for name in CERTIFICATE_SCORES},
    )


def test_unscored_and_unusable_cases_are_left_out() -> None:
    n = 2 * MIN_PER_KIND + 3
    control_passed = [i >= MIN_PER_KIND for i in range(n)]
    bound = [0.2] * MIN_PER_KIND + [0.8] * (n - MIN_PER_KIND)
    bound[-1] = float("nan")  # a failure with no certificate value: unscored
    cand = arm_rows([False] * n, bound, [-1.0] * n)
    control = arm_rows(control_passed, [float("nan")] * n, [-0.5] * n)
    usable = np.ones(n, bool)
    usable[-2] = False  # an engine error on one side: not a pair at all
    block = certificate_attribution(cand, control, usable, 0.95)
    assert block is not None
    assert (block["cache_induced"], block["own"], block["unscored"]) == (
        n - MIN_PER_KIND - 2,
        MIN_PER_KIND,
        1,
    )
    assert block["certificate"]["auc"] == 1.0
    assert block["output_confidence"]["auc"] == 0.5  # every logprob tied: chance
    assert certificate_attribution(control, control, usable, 0.95) is None


def test_a_part_stored_before_the_certificate_columns_reads_them_as_null(tmp_path: Path) -> None:
    row_v1: dict[str, object] = {f.name: None for f in RESULT_SCHEMA_V1}
    row_v1.update(case_id="c1", arm="full", replicate=0, attempt=0, passed=True, output_token_ids=[1])
    part = tmp_path / "part-00000.parquet"
    pq.write_table(pa.Table.from_pylist([row_v1], schema=RESULT_SCHEMA_V1), part)
    table = report_columns(part)
    assert table.column_names == RESULT_COLUMNS
    assert table.column("certificate_bound_max").to_pylist() == [None]
    assert table.column("certificate_bound_mean").to_pylist() == [None]


def test_a_part_stored_before_the_relative_columns_leaves_its_failures_unscored(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path)
    (part,) = (run_dir / "results" / ARM).glob("part-*.parquet")
    table = pq.read_table(part)
    old = table.select(RESULT_SCHEMA_V2.names).cast(RESULT_SCHEMA_V2)
    declared = {**(table.schema.metadata or {}), RESULT_VERSION_KEY: b"2"}  # its binding, version 2
    pq.write_table(old.replace_schema_metadata(declared), part)
    results = run_dir / "results"  # the index lists the part as rewritten, as a version-2 run stored it
    listed = read_index(results) | {key_of(results, part): entry(part, old.num_rows)}
    write_index(results, stored_run_id(run_dir), listed)
    assert report_columns(part).column("certificate_relative_bound_mean").null_count == old.num_rows
    block = report(run_dir)["arms"][0]["certificate_attribution"]
    assert (block["cache_induced"], block["own"], block["unscored"]) == (0, 0, 24)
    assert block["certificate"] is None and block["cap_share"] is None
