"""The report JSON's schema (reports/templates/report.schema.json): reports of varied fake-engine runs
fit it, every decision and optional block among them, and it refuses what a report may not hold."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers.cli import kvgate as invoke
from helpers.report_schema import assert_fits_schema, report_json

from kvgate.report.analysis import build as model
from kvgate.report.schema import (
    CHECK_ENV,
    ReportShapeError,
    check_report,
    inlined,
    report_errors,
    report_schema,
)

SUITE = """name = "gate320"
[[generate]]
generator = "passkey"
lengths = [128, 256]
depths = [0.1, 0.4, 0.6, 0.9]
per_cell = 40
"""
MATRICES = {
    "composite": """[matrix]
control = "full"
candidates = ["snapkv-50", "fp8-e4m3", "snapkv-50+fp8", "offload-host"]
confirm_reruns = 1
[faults.fp8-e4m3]
wrong_answer_rate = 0.2
["faults"."snapkv-50+fp8"]
wrong_answer_rate = 0.3
""",
    "errors": """[matrix]
control = "full"
candidates = ["fp8-e4m3"]
aa_replicate = false
[faults.fp8-e4m3]
error_rate = 0.2
""",
    "leak": """[matrix]
control = "full"
candidates = ["fp8-e4m3"]
[faults."*"]
salt_leak = true
""",
    "crash": """[matrix]
control = "full"
candidates = ["streaming-50"]
[faults."*"]
crash_after = 10
""",
}
SEQUENTIAL = "tau = 0.05\nconfidence = 0.95\nsequential = true\nlook_every = 80\n"
LOOSE = "tau = 0.1\nconfidence = 0.7\n"
CHANGED = ("--policy-changed-reason", "a looser limit for a trial", "--policy-unsafe-reason", "a trial")


def run(runs: Path, workload: Path, *args: Any) -> Path:
    """A fake-engine run's directory (the one new directory under `runs`)."""
    before = set(runs.iterdir()) if runs.exists() else set()
    result = invoke("run", "--engine", "fake", "-w", workload, "-o", runs, "--quiet", *args)
    assert result.exit_code in (0, 1, 3, 4), result.output
    (run_dir,) = [p for p in set(runs.iterdir()) - before if (p / "manifest.json").exists()]
    return run_dir


def report(run_dir: Path, *args: Any) -> dict[str, Any]:
    result = invoke("report", run_dir, "--format", "json", *args)
    assert result.exit_code in (0, 1, 3, 4), result.output
    data = report_json(result.stdout)
    assert data["exit_code"] == result.exit_code or "--compare" in args
    return data


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory, smoke_workload: Path) -> dict[str, dict[str, Any]]:
    """Reports of varied runs, by what each shows."""
    tmp = tmp_path_factory.mktemp("schema")
    suite = tmp / "gate320.toml"
    suite.write_text(SUITE)
    workload = tmp / "gate320.parquet"
    assert invoke("freeze", suite, "-o", workload).exit_code == 0
    for name, body in MATRICES.items():
        (tmp / f"{name}.toml").write_text(body)
    (tmp / "sequential.toml").write_text(SEQUENTIAL)
    (tmp / "loose.toml").write_text(LOOSE)
    runs = tmp / "runs"
    clean = run(runs, workload)
    faults = run(runs, workload, "-m", "faults-demo")
    smoke = run(runs, smoke_workload)
    crashed = run(runs, smoke_workload, "-m", tmp / "crash.toml")
    out = {
        "pass": report(clean),
        "fail, re-runs": report(faults),
        "inconclusive": report(smoke),
        "reuse arms": report(run(runs, smoke_workload, "-m", "reuse")),
        "composite": report(run(runs, smoke_workload, "-m", tmp / "composite.toml")),
        "engine errors": report(run(runs, smoke_workload, "-m", tmp / "errors.toml")),
        "isolation broken": report(run(runs, smoke_workload, "-m", tmp / "leak.toml")),
        "sequential": report(run(runs, workload, "-m", "faults-demo", "--policy", tmp / "sequential.toml")),
        "incomplete": report(crashed),
        "compare": report(faults, "--compare", clean),
        "compare, different workloads": report(smoke, "--compare", clean, "--allow-different"),
        "policy changed": report(clean, "--policy", tmp / "loose.toml", *CHANGED),
    }
    for _ in range(10):  # each session of the crashing engine gets 10 more generations done
        resumed = invoke("run", "--resume", crashed, "--quiet")
        if resumed.exit_code != 4:
            break
    assert resumed.exit_code in (0, 1, 3), resumed.output
    out["resumed"] = report(crashed)
    return out


def test_reports_of_varied_runs_fit_the_schema(reports: dict[str, dict[str, Any]]) -> None:
    for data in reports.values():
        assert_fits_schema(data)  # report() checked each already; this names the test's promise
    decisions = {name: data["decision"] for name, data in reports.items()}
    assert {"pass", "fail", "inconclusive", "error"} <= set(decisions.values()), decisions
    assert decisions["incomplete"] == "error" and decisions["resumed"] != "error"
    arms = [arm for data in reports.values() for arm in data["arms"]]
    assert any(arm["attribution"] and arm["attribution"]["classes"] for arm in arms)
    assert all("sequential" in arm for arm in reports["sequential"]["arms"])
    assert any(arm["failures"] for arm in arms) and any(arm["missing_pairs"] for arm in arms)
    assert any(arm["reproducible_failures"] for arm in arms)
    assert any(not check["ok"] for check in reports["isolation broken"]["isolation"])
    assert reports["compare"]["compare"]["regressions"]
    assert "workload" in reports["compare, different workloads"]["compare"]["differs"]
    assert reports["policy changed"]["policy"]["changed_reason"] and reports["policy changed"]["notes"]


def test_the_schema_is_shipped_valid_and_of_the_reports_version() -> None:
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"]["const"] == model.SCHEMA
    assert set(schema["required"]) >= {"run", "policy", "arms", "decision", "exit_code"}


def _broken(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A copy of `data` with the value at `path` replaced (a new key where it had none)."""
    out = copy.deepcopy(data)
    where = out
    for step in path[:-1]:
        where = where[step]
    where[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        (("arms", 1, "slices", 0, "cfr"), 1.5, "arms/1/slices/0/cfr"),
        (("arms", 1, "slices", 0, "control_passes"), -1, "arms/1/slices/0/control_passes"),
        (("arms", 1, "slices", 0, "decision"), "error", "arms/1/slices/0/decision"),
        (("arms", 1, "slices", 0, "role"), "critical", "arms/1/slices/0/role"),
        (("arms", 1, "decision"), "maybe", "arms/1"),
        (("exit_code",), 2, "exit_code"),
        (("arms", 1, "exit_code"), 0, "arms/1"),  # a fail that exits 0
        (("arms", 1, "surprise"), 1, "arms/1"),
        (("run", "run_id"), "../elsewhere", "run/run_id"),
        (("arms", 1, "spec", "dtype"), "int4", "arms/1/spec"),
        (("arms", 0, "spec", "ratio"), 1.0, "arms/0/spec"),
        (("policy", "confidence"), 1.0, "policy/confidence"),
        (("noise_floor", "flip_rate"), "12%", "noise_floor"),
    ],
)
def test_the_schema_refuses_what_a_report_may_not_hold(
    reports: dict[str, dict[str, Any]], path: tuple[Any, ...], value: Any, named: str
) -> None:
    good = reports["fail, re-runs"]
    arms = [(a["arm"], a["decision"]) for a in good["arms"][:2]]
    assert arms == [("streaming-50", "pass"), ("fp8-e4m3", "fail")]
    errors = report_errors(_broken(good, path, value))
    assert errors and any(e.startswith(named) for e in errors), errors


def test_a_report_that_breaks_the_schema_is_an_internal_error(
    reports: dict[str, dict[str, Any]], tmp_path: Path, smoke_workload: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ReportShapeError, match=r"does not fit its schema: .*exit_code: 7 is not one of"):
        check_report(_broken(reports["pass"], ("exit_code",), 7))
    run_dir = run(tmp_path / "runs", smoke_workload)
    monkeypatch.setenv(CHECK_ENV, "1")
    monkeypatch.setattr(model, "__version__", "")  # kvgate_version must be a non-empty string
    result = invoke("report", run_dir, "--format", "md")
    assert result.exit_code == 70, result.output
    assert "does not fit its schema: kvgate_version" in result.stderr


def _small(report: dict[str, Any]) -> dict[str, Any]:
    """The report with each list cut to its first two items (every kind of object is still in it)."""

    def cut(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: cut(v) for k, v in value.items()}
        if isinstance(value, list):
            return [cut(v) for v in value[:2]]
        return value

    out: dict[str, Any] = cut(report)
    return out


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to the scalar values of `value`."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))]
    return [path]


def test_the_checked_schema_gives_the_shipped_schemas_verdicts(reports: dict[str, dict[str, Any]]) -> None:
    """The check runs on `inlined(schema)`: on reports with one value replaced, its verdicts are the
    shipped schema's."""
    shipped = jsonschema.Draft202012Validator(report_schema())
    checked = jsonschema.Draft202012Validator(inlined(report_schema()))
    rng = random.Random(0)
    verdicts = []
    for name in ("composite", "compare", "sequential"):
        data = _small(reports[name])
        for path in rng.sample(_leaves(data), 10):
            for value in (None, -1, 1.5, "x"):
                broken = _broken(data, path, value)
                verdict = shipped.is_valid(broken)
                assert checked.is_valid(broken) == verdict, (name, path, value)
                verdicts.append(verdict)
    assert True in verdicts and False in verdicts
