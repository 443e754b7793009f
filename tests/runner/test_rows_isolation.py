"""Result rows as docs/reference.md lists them, engine errors kept apart from cache-induced failures, and
isolation checked on every run from the rows' cache counters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runner_support import Invoke, only_run, stored_rows, write_matrix

RESULT_COLUMNS = {
    "case_id", "arm", "replicate", "attempt", "output_text", "output_token_ids", "passed", "fail_kind",
    "n_prompt_tokens", "n_cached_tokens", "n_kv_entries_kept", "ttft_s", "latency_s", "mean_logprob",
    "min_logprob", "first_divergence",
}  # fmt: skip
TWO_CANDIDATES = '[matrix]\ncontrol = "full"\ncandidates = ["streaming-50", "fp8-e4m3"]\n'


def _run(kvgate: Invoke, workload: Path, tmp_path: Path, body: str, *extra: object) -> tuple[int, str, Path]:
    matrix = write_matrix(tmp_path / "m.toml", body)
    result = kvgate("run", "--engine", "fake", "-w", workload, "-m", matrix, "-o", tmp_path / "runs", *extra)
    return result.exit_code, result.stderr, only_run(tmp_path / "runs")


def test_rows_carry_the_result_columns_and_first_divergence(
    kvgate: Invoke, smoke_workload: Path, tmp_path: Path
) -> None:
    body = TWO_CANDIDATES + "[faults.fp8-e4m3]\nwrong_answer_rate = 0.3\n"
    _, _, run_dir = _run(kvgate, smoke_workload, tmp_path, body, "--quiet")
    rows = stored_rows(run_dir)
    assert len(rows) == 4 * 24
    assert set(rows[0]) | {"ttft_s", "latency_s"} >= RESULT_COLUMNS
    by_arm = {arm: [r for r in rows if r["arm"] == arm] for arm in ("full", "streaming-50", "fp8-e4m3")}
    assert all(r["first_divergence"] is None for r in rows if r["arm"] != "fp8-e4m3")
    wrong = [r for r in by_arm["fp8-e4m3"] if not r["passed"]]
    assert 3 <= len(wrong) <= 14
    assert all(r["fail_kind"] == "mismatch" and r["first_divergence"] == 0 for r in wrong)
    assert all(r["first_divergence"] is None for r in by_arm["fp8-e4m3"] if r["passed"])
    assert all(
        r["n_kv_entries_kept"] == r["n_prompt_tokens"] - r["n_prompt_tokens"] // 2
        for r in by_arm["streaming-50"]
    )
    assert {r["replicate"] for r in by_arm["full"]} == {0, 1}  # the A/A replicate is on by default


def test_engine_errors_are_reported_apart(kvgate: Invoke, smoke_workload: Path, tmp_path: Path) -> None:
    body = (
        '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\nconfirm_reruns = 1\n'
        "[faults.fp8-e4m3]\nerror_rate = 0.3\n"
    )
    code, _, run_dir = _run(kvgate, smoke_workload, tmp_path, body, "--json")
    assert code == 4  # engine errors: an error, not a gate result
    errors = [r for r in stored_rows(run_dir) if r["fail_kind"] == "engine_error"]
    assert errors and all(r["arm"] == "fp8-e4m3" and r["first_divergence"] is None for r in errors)
    assert not [r for r in stored_rows(run_dir) if r["attempt"] > 0]  # errors are never re-run as failures
    report = json.loads(kvgate("report", run_dir, "--format", "json").stdout)
    (arm,) = report["arms"]
    assert arm["engine_errors"] == len(errors)
    assert arm["slices"][0]["cache_induced_failures"] == 0


def test_control_engine_errors_give_no_divergence(
    kvgate: Invoke, smoke_workload: Path, tmp_path: Path
) -> None:
    body = '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\n[faults.full]\nerror_rate = 0.3\n'
    _, _, run_dir = _run(kvgate, smoke_workload, tmp_path, body, "--quiet")
    rows = stored_rows(run_dir)
    failed = {r["case_id"] for r in rows if r["arm"] == "full" and r["replicate"] == 0 and r["fail_kind"]}
    assert failed
    assert all(
        r["first_divergence"] is None for r in rows if r["arm"] == "fp8-e4m3" and r["case_id"] in failed
    )


def test_a_salt_leak_in_a_candidate_exits_4_naming_it(
    kvgate: Invoke, smoke_workload: Path, tmp_path: Path
) -> None:
    body = TWO_CANDIDATES + "[faults.fp8-e4m3]\nsalt_leak = true\n"
    code, stderr, run_dir = _run(kvgate, smoke_workload, tmp_path, body, "--quiet")
    assert code == 4
    (line,) = [x for x in stderr.splitlines() if "isolation" in x]
    assert "arm 'fp8-e4m3' reported cache hits" in line and "namespaces leak" in line
    report = kvgate("report", run_dir, "--format", "json")  # the report reads the same counters
    assert report.exit_code == 4 and line in report.stderr


def test_a_salt_leak_in_the_control_exits_4_naming_it(
    kvgate: Invoke, smoke_workload: Path, tmp_path: Path
) -> None:
    body = '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\n[faults.full]\nsalt_leak = true\n'
    code, stderr, _ = _run(kvgate, smoke_workload, tmp_path, body, "--json")
    assert code == 4
    assert "isolation: arm 'full' reported cache hits" in stderr
    assert "isolation: arm 'full (A/A replicate 1)' reported cache hits" in stderr


def test_reuse_arm_hits_in_its_own_namespace_only(
    kvgate: Invoke, smoke_workload: Path, tmp_path: Path
) -> None:
    body = '[matrix]\ncontrol = "full"\ncandidates = ["prefix-reuse", "fp8-e4m3"]\n'
    code, stderr, run_dir = _run(kvgate, smoke_workload, tmp_path, body, "--quiet")
    assert code != 4, stderr
    rows = stored_rows(run_dir)
    reuse = [r for r in rows if r["arm"] == "prefix-reuse"]
    assert sum(r["n_cached_tokens"] > 0 for r in reuse) == 23  # all but the first: a fresh namespace
    assert all(r["n_cached_tokens"] == 0 for r in rows if r["arm"] != "prefix-reuse")
    report = json.loads(kvgate("report", run_dir, "--format", "json").stdout)
    assert report["noise_floor"]["flips"] == 0


def test_a_reuse_arm_served_kv_from_another_namespace_exits_4(
    kvgate: Invoke, smoke_workload: Path, tmp_path: Path
) -> None:
    """A leak planted on the reuse arms alone: the prefix-reuse arm, run second, finds the span arm's
    prompts cached whole. Reuse arms may hit, so only the size of the hits can show it."""
    body = (
        '[matrix]\ncontrol = "full"\ncandidates = ["span-reuse", "prefix-reuse"]\n'
        "[faults.prefix-reuse]\nsalt_leak = true\n[faults.span-reuse]\nsalt_leak = true\n"
    )
    code, stderr, _ = _run(kvgate, smoke_workload, tmp_path, body, "--quiet")
    assert code == 4
    (line,) = [x for x in stderr.splitlines() if "isolation" in x]
    assert "reuse arm 'prefix-reuse' read more cached tokens than its own prompts can explain" in line
    assert "KV from another namespace" in line
    clean = tmp_path / "clean"
    clean.mkdir()
    body = '[matrix]\ncontrol = "full"\ncandidates = ["prefix-reuse", "span-reuse"]\n'
    code, stderr, _ = _run(kvgate, smoke_workload, clean, body, "--quiet")
    assert code != 4, stderr


def test_shared_prefixes_against_a_pairwise_scan() -> None:
    import random

    from kvgate.report.analysis.isolation import shared_prefixes

    rng = random.Random(3)
    prompts = [[rng.choice((1, 2)) for _ in range(rng.randint(0, 8))] for _ in range(60)]

    def lcp(a: list[int], b: list[int]) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    brute = [
        max((lcp(p, q) for j, q in enumerate(prompts) if j != i), default=0) for i, p in enumerate(prompts)
    ]
    assert shared_prefixes(prompts) == brute


LEAKS = {
    "clean": TWO_CANDIDATES,
    "candidate leak": TWO_CANDIDATES + "[faults.fp8-e4m3]\nsalt_leak = true\n",
    "control leak": (
        '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\n[faults.full]\nsalt_leak = true\n'
    ),
    "reuse from another namespace": (
        '[matrix]\ncontrol = "full"\ncandidates = ["span-reuse", "prefix-reuse"]\n'
        "[faults.prefix-reuse]\nsalt_leak = true\n[faults.span-reuse]\nsalt_leak = true\n"
    ),
}


@pytest.mark.parametrize("name", list(LEAKS))
def test_isolation_from_the_reports_rows_equals_reading_the_parts(
    kvgate: Invoke, smoke_workload: Path, tmp_path: Path, name: str
) -> None:
    """The report counts isolation from the columns it has read; the sentences are the same as when the
    parts are read again for it."""
    from kvgate.report.analysis.isolation import isolation_violations
    from kvgate.report.analysis.run_data import RunRows, read_cases
    from kvgate.rundir.manifest import read_manifest

    _, _, run_dir = _run(kvgate, smoke_workload, tmp_path, LEAKS[name], "--quiet")
    manifest = read_manifest(run_dir)
    rows = RunRows(run_dir, read_cases(manifest), list(manifest["arms"]))
    from_parts = isolation_violations(run_dir)
    assert isolation_violations(run_dir, rows.counters()) == from_parts
    assert bool(from_parts) == (name != "clean")
