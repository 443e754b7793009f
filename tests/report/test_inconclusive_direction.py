"""An inconclusive verdict says which way it leans, in every format: the point estimate above or below τ,
the interval, and whether more cases or more clusters would settle it (a user's 30-request trace in
one prefix group, an arm answering some of them wrongly, τ 2%)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvgate.cli import cli
from kvgate.report.analysis.slice_stats import leaning_reason

SYSTEM = "You are the support bot of Acme. " + " ".join(
    f"Rule {i} applies to every ticket." for i in range(40)
)


@pytest.fixture(scope="module")
def leaning_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("lean")
    records = [
        {
            "id": f"req-{i}",
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Ticket {i}: the code is {1000 + i}. Which code?"},
            ],
            "expected": [str(1000 + i)],
            "validator": "substring_any",
            "max_tokens": 8,
        }
        for i in range(30)
    ]
    (folder / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "suite.toml").write_text('name = "lean"\n[[trace]]\npath = "trace.jsonl"\n')
    (folder / "m.toml").write_text(
        '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\naa_replicate = false\n'
        "[faults.fp8-e4m3]\nwrong_answer_rate = 0.15\n"
    )
    (folder / "policy.toml").write_text("tau = 0.02\nmin_control_passes = 10\n")
    runner = CliRunner()
    assert (
        runner.invoke(cli, ["freeze", str(folder / "suite.toml"), "-o", str(folder / "w.parquet")]).exit_code
        == 0
    )
    args = ["run", "--engine", "fake", "-w", str(folder / "w.parquet"), "-m", str(folder / "m.toml")]
    args += ["--policy", str(folder / "policy.toml"), "--run-dir", str(folder / "run"), "--quiet"]
    assert runner.invoke(cli, args).exit_code == 3
    return folder / "run"


def report(run: Path, fmt: str) -> str:
    result = CliRunner().invoke(cli, ["report", str(run), "--format", fmt], env={"COLUMNS": "400"})
    assert result.exit_code == 3, result.output
    return result.stdout


def test_an_arm_above_tau_says_so_in_every_format(leaning_run: Path) -> None:
    data = json.loads(report(leaning_run, "json"))
    (arm,) = data["arms"]
    everything = next(s for s in arm["slices"] if s["slice"] == "all")
    k, n = everything["cache_induced_failures"], everything["control_passes"]
    assert everything["decision"] == "inconclusive" and k / n > 0.02 and everything["clusters"] == 1
    leaning = f"CFR {100 * k / n:.1f}% above τ 2.0%, bound not yet significant"
    settle = f"more clusters would settle it ({n} control passes in 1 cluster)"
    assert arm["reason"].startswith(leaning) and arm["reason"].endswith(settle), arm["reason"]
    first = arm["failures"][0]  # traced back to the request: its own id and what it asked
    assert first["source_id"].startswith("req-") and first["prompt"].startswith("Ticket ")
    for fmt in ("table", "md", "html", "junit"):
        text = report(leaning_run, fmt)
        assert leaning in text and "inside the confidence interval" not in text, fmt


def row(**given: Any) -> dict[str, Any]:
    base = {"cfr": 0.0, "tau": 0.05, "cfr_lower": 0.0, "cfr_upper": 0.09, "control_passes": 40}
    return base | {"clusters": 40, "passes_needed": 59} | given


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            {},
            "CFR 0.0% below τ 5.0%, upper bound not yet under τ (interval 0.0%–9.0%); more cases would "
            "settle it: a PASS needs ≈59 control passes at this CFR",
        ),
        (
            {"clusters": 8},
            "CFR 0.0% below τ 5.0%, upper bound not yet under τ (interval 0.0%–9.0%); more clusters would "
            "settle it (40 control passes in 8 clusters)",
        ),
        (
            {"cfr": 0.05, "passes_needed": None},
            "CFR 5.0% at τ 5.0%, upper bound not yet under τ (interval 0.0%–9.0%); "
            "more cases would settle it",
        ),
        (
            {"cfr": 0.1, "cfr_lower": 0.03, "cfr_upper": 0.2},
            "CFR 10.0% above τ 5.0%, bound not yet significant (interval 3.0%–20.0%); "
            "more cases would settle it",
        ),
    ],
)
def test_the_leaning_reason(given: dict[str, Any], expected: str) -> None:
    assert leaning_reason(row(**given)) == expected
