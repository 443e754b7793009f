"""`kvgate report RUN --samples FILE` writes one JSON line per (candidate, case) pair that agrees with
the report: the same cache-induced failures, the counts of `all`, the trace's own request ids."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from kvgate.cli import cli


def test_the_samples_file_has_every_pair_and_agrees_with_the_report(tmp_path: Path) -> None:
    records = [
        {"id": f"req-{i}", "messages": [{"role": "user", "content": f"Code {i}?"}], "expected": [str(i)]}
        for i in range(40)
    ]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "s.toml").write_text('name = "s"\n[[trace]]\npath = "t.jsonl"\nvalidator = "substring_any"\n')
    (tmp_path / "m.toml").write_text(
        '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3", "streaming-50"]\naa_replicate = false\n'
        "[faults.fp8-e4m3]\nwrong_answer_rate = 0.2\n"
    )
    runner = CliRunner()
    assert (
        runner.invoke(cli, ["freeze", str(tmp_path / "s.toml"), "-o", str(tmp_path / "w.parquet")]).exit_code
        == 0
    )
    run = tmp_path / "run"
    args = ["run", "--engine", "fake", "-w", str(tmp_path / "w.parquet"), "-m", str(tmp_path / "m.toml")]
    assert runner.invoke(cli, [*args, "--run-dir", str(run), "--quiet"]).exit_code in (1, 3)
    samples = tmp_path / "samples.jsonl"
    result = runner.invoke(cli, ["report", str(run), "--format", "json", "--samples", str(samples)])
    report = json.loads(result.stdout)
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(lines) == 2 * 40 and [x["arm"] for x in lines] == ["fp8-e4m3"] * 40 + ["streaming-50"] * 40
    assert {x["source_id"] for x in lines} == {f"req-{i}" for i in range(40)}
    for arm in report["arms"]:
        mine = [x for x in lines if x["arm"] == arm["arm"]]
        everything = next(s for s in arm["slices"] if s["slice"] == "all")
        outcomes = Counter(x["outcome"] for x in mine)
        assert outcomes["cache_induced"] == everything["cache_induced_failures"]
        assert outcomes["both_pass"] + outcomes["cache_induced"] == everything["control_passes"]
        failing = [x["case_id"] for x in mine if x["outcome"] == "cache_induced"]
        assert failing == [f["case_id"] for f in arm["failures"]]
        for x in mine:
            assert x["control_arm"] == "full" and x["prompt"] == f"Code {x['source_id'][4:]}?"
            assert x["candidate"]["passed"] == (x["outcome"] in ("both_pass", "candidate_only_pass"))
    assert Counter(x["outcome"] for x in lines if x["arm"] == "fp8-e4m3")["cache_induced"] > 0
