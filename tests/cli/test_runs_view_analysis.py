"""Browsing runs: `kvgate runs [DIR]` (table and --json), `kvgate view RUN` (the HTML written, opened or
served on loopback), and the analysis API's DataFrames, end to end on fake runs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvgate.analysis import pairs_df, runs_df, slices_df
from kvgate.cli import cli

MATRIX = (
    '[matrix]\ncontrol = "full"\ncandidates = ["streaming-50", "fp8-e4m3"]\n'
    "[faults.fp8-e4m3]\nwrong_answer_rate = 0.5\n"
)


def kvgate(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.stdout


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory, smoke_workload: Path) -> Path:
    """Two runs (inconclusive, failed) and a folder that is no run."""
    folder = tmp_path_factory.mktemp("runs")
    matrix = folder.parent / "planted.toml"
    matrix.write_text(MATRIX)
    common = ["run", "--engine", "fake", "-w", smoke_workload, "--quiet"]
    assert kvgate(*common, "--run-dir", folder / "a-first")[0] == 3
    assert kvgate(*common, "-m", matrix, "--run-dir", folder / "b-second")[0] == 1
    (folder / "workloads").mkdir()
    return folder


def test_runs_lists_each_run_with_its_decision(runs_dir: Path) -> None:
    code, out = kvgate("runs", runs_dir)
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:3] == ["run", "created", "(UTC)"] and len(lines) == 3
    manifests = [json.loads((runs_dir / d / "manifest.json").read_text()) for d in ("a-first", "b-second")]
    for line, manifest, decision in zip(
        lines[1:], manifests, ("inconclusive (exit 3)", "fail (exit 1)"), strict=True
    ):
        assert line.startswith(manifest["run_id"]) and line.endswith(decision) and " fake " in line
    code, out = kvgate("runs", runs_dir, "--json")
    rows = json.loads(out)
    assert [r["decision"] for r in rows] == ["inconclusive", "fail"] and rows[1]["candidates"] == [
        "streaming-50",
        "fp8-e4m3",
    ]
    assert kvgate("runs", runs_dir / "missing")[0] == 2


def test_an_edited_run_is_listed_as_unreadable(runs_dir: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "runs"
    shutil.copytree(runs_dir / "a-first", copy / "a-first")
    manifest = copy / "a-first" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"engine": "fake"', '"engine": "hf"', 1))
    (row,) = json.loads(kvgate("runs", copy, "--json")[1])
    assert row["decision"] == "unreadable" and row["note"]


def test_view_writes_the_html_report(runs_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["view", str(runs_dir / "b-second"), "-o", str(out), "--no-open"])
    assert result.exit_code == 0 and f"wrote {out}" in result.stderr
    assert out.read_text().startswith("<!doctype html") or "<html" in out.read_text()[:200]


def test_view_serves_the_report_on_loopback(runs_dir: Path) -> None:
    argv = [sys.executable, "-c", "from kvgate.cli import main; main()", "view", str(runs_dir / "a-first")]
    served = subprocess.Popen(
        [*argv, "--serve"],
        stderr=subprocess.PIPE,
        text=True,
        # A shell's background job (`make test &`) ignores SIGINT, and children inherit that; Ctrl-C
        # reaches a terminal's foreground job with the default action, which is what this test means.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert served.stderr is not None
        served.stderr.readline()  # wrote …
        line = served.stderr.readline()
        url = line.split("serving ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url, timeout=30) as page:
            body = page.read().decode()
        run_id = json.loads((runs_dir / "a-first" / "manifest.json").read_text())["run_id"]
        assert run_id in body  # the report itself, nothing else of the run directory
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url + "manifest.json", timeout=30)
    finally:
        served.send_signal(signal.SIGINT)
        assert served.wait(timeout=30) == 0


def test_the_analysis_frames_agree_with_the_report(runs_dir: Path) -> None:
    runs = runs_df(runs_dir)
    assert list(runs["decision"]) == ["inconclusive", "fail"] and str(runs["created_at"].dt.tz) == "UTC"
    report = json.loads(kvgate("report", runs_dir / "b-second", "--format", "json")[1])
    pairs = pairs_df(runs_dir / "b-second")
    assert len(pairs) == 2 * 24 and set(pairs["arm"]) == {"streaming-50", "fp8-e4m3"}
    assert {"task", "ctx_bucket", "candidate_passed", "control_output", "outcome"} <= set(pairs.columns)
    for arm in report["arms"]:
        mine = pairs[pairs["arm"] == arm["arm"]]
        failing = mine[mine["outcome"] == "cache_induced"]["case_id"].tolist()
        assert failing == [f["case_id"] for f in arm["failures"]]
    slices = slices_df(runs_dir / "b-second")
    assert len(slices) == sum(len(a["slices"]) for a in report["arms"])
    everything = slices[(slices["arm"] == "fp8-e4m3") & (slices["slice"] == "all")].iloc[0]
    expected = next(s for s in report["arms"][1]["slices"] if s["slice"] == "all")
    assert everything["decision"] == expected["decision"] == "fail" and everything["cfr"] == expected["cfr"]
