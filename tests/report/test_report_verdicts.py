"""What a release review reads first: one verdict per arm in every format, failing examples and gains
from the stored rows, inconclusive arms explained, a terminal table that fits its width, and Markdown
that stays within a GitHub comment."""

from __future__ import annotations

import copy
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers.report_fixed_run import CONTROL_FAILS, FAILS, SPEED, case_id, ctx, depth, task
from rich.console import Console

from kvgate.cli import cli
from kvgate.gate.decision import EXIT_CODES, combine
from kvgate.report.analysis.evidence import prompt_snippet
from kvgate.report.document.arm import Arm
from kvgate.report.document.findings import Failure
from kvgate.report.document.gains import Gains
from kvgate.report.render import text
from kvgate.report.render.formats import render
from kvgate.report.render.markdown import LIMIT
from kvgate.report.render.table import render_terminal


@pytest.fixture(scope="module")
def report(fixed_run: Path) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["report", str(fixed_run), "--format", "json"])
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def terminal(report: dict[str, Any], width: int) -> str:
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=width, color_system=None, legacy_windows=False))
    return buf.getvalue()


def test_each_arm_has_its_exit_code_beside_the_overall_one(report: dict[str, Any]) -> None:
    assert [a["exit_code"] for a in report["arms"]] == [1, 3, 3, 3, 4]
    assert all(a["exit_code"] == EXIT_CODES[a["decision"]] for a in report["arms"])
    assert report["exit_code"] == EXIT_CODES[combine(a["decision"] for a in report["arms"])] == 1


def test_every_format_opens_with_one_verdict_line_per_arm(report: dict[str, Any]) -> None:
    arms = report["arms"]
    lines = terminal(report, 160).splitlines()
    head = lines[1 : lines.index("gate: FAIL (exit 1)")]  # the verdicts, before any other detail
    assert [line.split()[:4] for line in head if not line.startswith(" ")] == [
        [a["arm"], a["decision"].upper(), "(exit", f"{a['exit_code']})"] for a in arms
    ]
    assert "CFR 5/46 = 10.9% (upper 19.2%, τ 10.0%) · slice critical failed" in head[0]
    md = render(report, "md")
    first_table = md[: md.index("- run ")]
    for a in arms:
        assert f"| `{a['arm']}` |" in first_table and f"(exit {a['exit_code']})" in first_table
    html = render(report, "html")
    verdicts = html[html.index('class="verdicts"') : html.index('class="cards"')]
    assert html.index('class="verdicts"') < html.index("<section")
    assert all(f"exit {a['exit_code']}" in verdicts and a["arm"] in verdicts for a in arms)
    root = ET.fromstring(render(report, "junit"))
    for suite, a in zip(root.findall("testsuite"), arms, strict=True):
        first = suite.find("testcase")
        assert first is not None and first.get("name") == "(arm decision)"
        message = "".join(first.itertext()).strip()
        assert message.startswith(f"{a['arm']}: {a['decision'].upper()} (exit {a['exit_code']}) · CFR")


def test_failing_examples_are_the_cache_induced_failures(report: dict[str, Any]) -> None:
    snapkv = report["arms"][0]
    expected = sorted(FAILS["snapkv-50"] - CONTROL_FAILS)
    assert [f["case_id"] for f in snapkv["failures"]] == [case_id(i) for i in expected]
    for f, i in zip(snapkv["failures"], expected, strict=True):
        assert f == {
            "case_id": case_id(i),
            "source_id": None,  # the fixed run's workload has no record ids
            "prompt": f"question {i}",
            "labels": {"task": task(i), "ctx_bucket": ctx(i), "depth_bucket": depth(i)},
            "expected": f"answer {i}",
            "control_output": f"answer {i}",
            "candidate_output": f"answer {i + 100}",
            "detail": f"missing 'answer {i}'",
            "fail_kind": "mismatch",
            "first_divergence": i % 5,
        }
    assert report["arms"][3]["failures"] == []  # offload fails only where the control fails too
    table = terminal(report, 100)
    section = table[table.index("snapkv-50 (eviction") : table.index("fp8-e4m3 (quantize)")]
    md = render(report, "md")
    md_section = md[md.index("snapkv-50 (eviction") : md.index("fp8-e4m3 (quantize)")]
    junit = ET.fromstring(render(report, "junit")).find("testsuite/testcase/failure")
    assert junit is not None and junit.text
    for shown in (section, md_section, junit.text):  # the same examples in every format
        assert "5 cache-induced failures" in shown and "(first " not in shown
        assert [f"missing 'answer {i}'" in shown for i in expected] == [True] * len(expected)


def test_every_format_shows_as_many_examples_and_the_html_folds_the_rest(report: dict[str, Any]) -> None:
    many = copy.deepcopy(report)
    arm = many["arms"][0]
    arm["failures"] = [arm["failures"][0] | {"case_id": f"case-x{i}", "detail": f"d{i}"} for i in range(12)]
    heading = "12 cache-induced failures (first 5; all in --format json)"
    junit = ET.fromstring(render(many, "junit")).find("testsuite/testcase/failure")
    assert junit is not None and junit.text
    for shown in (terminal(many, 200), render(many, "md"), junit.text):
        assert heading in shown and "case-x4 " in shown and "case-x5 " not in shown
    html = render(many, "html")
    assert "12 cache-induced failures" in html and "first 5" not in html
    assert all(f"case-x{i} " in html for i in range(12)) and "<summary>7 more</summary>" in html


def test_a_failure_names_its_records_own_id_and_prompt() -> None:
    f = Failure.model_validate(
        dict.fromkeys(("expected", "control_output", "candidate_output", "detail", "fail_kind"))
        | {"case_id": "34240f5ede717f03", "source_id": "req-17", "labels": {"task": "support"}}
        | {"first_divergence": None}
    )
    assert text.case_name(f) == "req-17 [case 34240f5ede717f03] (task=support)"
    assert text.case_name(f.model_copy(update={"source_id": None})) == "34240f5ede717f03 (task=support)"
    chat = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "What  is\nthe code " + "x" * 90},
    ]
    snippet = prompt_snippet(json.dumps(chat))
    assert snippet is not None and snippet.startswith("What is the code x") and len(snippet) == 80
    assert snippet.endswith("…") and prompt_snippet(None) is None


def test_gains_against_the_control_in_the_same_run(report: dict[str, Any]) -> None:
    for arm in report["arms"]:
        g = arm["gains"]
        keep = 0.5 if "snapkv" in arm["arm"] else 1.0
        assert g["kv_kept"] == pytest.approx(keep) and g["kv_kept_median"] == pytest.approx(keep)
        for timing in ("ttft_s", "latency_s"):
            assert g[timing]["ratio"]["median"] == pytest.approx(SPEED[arm["arm"]])
            assert g[timing]["ratio"]["p95"] == pytest.approx(SPEED[arm["arm"]])
    assert report["arms"][4]["gains"]["n_pairs"] == 47  # the engine error leaves its pair out
    ttft = report["arms"][0]["gains"]["ttft_s"]["control"]
    assert ttft["median"] == pytest.approx(0.044) and ttft["p95"] == pytest.approx(0.049)
    assert "KV entries kept 50.0% of the control's" in render(report, "md")


def test_an_inconclusive_arm_says_what_a_verdict_needs(report: dict[str, Any]) -> None:
    table = terminal(report, 120)
    assert "needs: all (3/46): a PASS needs ≈145 control passes at this CFR (has 46)" in table
    assert "needs: critical (0/6): a PASS needs ≈22 control passes at this CFR (has 6)" in table
    assert "critical (6/6): CFR 100.0% ≥ τ" not in table
    md = render(report, "md")
    assert "- needs: all (3/46): a PASS needs ≈145 control passes" in md


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_terminal_report_fits_its_width(report: dict[str, Any], width: int) -> None:
    out = terminal(report, width)
    assert max(len(line) for line in out.splitlines()) <= width
    lines = out.splitlines()
    for arm in report["arms"]:
        start = lines.index(next(line for line in lines if line.startswith(f"{arm['arm']} (")))
        rows = lines[start : start + 4 + len(arm["slices"])]
        for s in arm["slices"]:
            row = next(line for line in rows if line.split() and line.split()[0] == s["slice"])
            assert row.rstrip().endswith(s["decision"].upper()), row
    dropped = "not shown at this width" in out
    assert dropped == (width < 120)


def wide_report(report: dict[str, Any], arms: int = 10, slices: int = 60) -> dict[str, Any]:
    """`arms` arms of `slices` slices each, with long slice names and every arm failing five cases."""
    base = report["arms"][0]
    wide = copy.deepcopy(report)
    wide["arms"] = []
    for a in range(arms):
        arm = copy.deepcopy(base)
        arm["arm"] = f"snapkv-window-64-keep-{a * 10}pct"
        arm["slices"] = [copy.deepcopy(base["slices"][0])] + [
            copy.deepcopy(base["slices"][1 + j % (len(base["slices"]) - 1)]) | {
                "slice": f"task=variable_tracking/ctx_bucket={j}k"
            }
            for j in range(slices - 1)
        ]  # fmt: skip
        wide["arms"].append(arm)
    return wide


def test_markdown_folds_slices_and_fits_a_github_comment(report: dict[str, Any]) -> None:
    md = render(report, "md")
    assert md.count("<details>") == len(report["arms"]) and "| `critical` ★⚑ |" in md
    wide = render(wide_report(report), "md")
    assert len(wide) < LIMIT, len(wide)
    assert wide.count("FAIL (exit 1)") >= 10 and "<details>" in wide
    assert wide.count("missing 'answer 0'") == 10  # every arm still shows a failing example
    assert wide.count("<summary>60 slices</summary>") == 10  # every slice, in fewer columns
    huge = render(wide_report(report, slices=120), "md")
    assert len(huge) < LIMIT and huge.count("FAIL (exit 1)") >= 10
    assert "more in --format json" in huge  # only gates, failing slices and those standing out


def test_model_output_is_escaped_in_html_and_markdown(report: dict[str, Any]) -> None:
    hostile = copy.deepcopy(report)
    hostile["arms"][0]["failures"][0]["candidate_output"] = "<script>alert(1)</script> | x"
    hostile["arms"][0]["reason"] = "<b>bold</b>"
    html = render(hostile, "html")
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>bold</b>" not in html
    md = render(hostile, "md")
    assert "</script> \\| x" in md  # a pipe in an answer does not split the table row


def test_kv_bytes_per_token_against_the_control() -> None:
    from kvgate.report.analysis.evidence import kv_bytes
    from kvgate.report.render.text import gains_text

    fp8 = {"kind": "quantize", "dtype": "fp8_e4m3"}
    both = {"kind": "composite", "of": [{"kind": "eviction"}, fp8]}
    spec = {"source": "spec"}
    assert kv_bytes(1.0, fp8, "bfloat16") == spec | {"share": 0.5, "bits": 8, "control_bits": 16}
    assert kv_bytes(0.5, both, "float32") == spec | {"share": 0.125, "bits": 8, "control_bits": 32}
    assert kv_bytes(0.5, {"kind": "eviction"}, "float16") == spec | {
        "share": 0.5,
        "bits": 16,
        "control_bits": 16,
    }
    assert kv_bytes(0.5, fp8, None) is None and kv_bytes(None, fp8, "float32") is None
    counted = {"share": 0.25}  # what the engine counted wins over what the spec implies
    assert kv_bytes(1.0, fp8, "bfloat16", counted) == {"share": 0.25, "source": "engine", "bits": None,
                                                       "control_bits": None}  # fmt: skip
    timing = {"n": 1, "control": {"median": 0.1, "p95": 0.1}, "candidate": {"median": 0.1, "p95": 0.1}}
    gains = {"n_pairs": 4, "kv_kept": 0.5, "kv_bytes": kv_bytes(0.5, both, "float32"),
             "ttft_s": timing | {"ratio": {"median": 1.0, "p95": 1.0}},
             "latency_s": timing | {"ratio": {"median": 1.0, "p95": 1.0}},
             "kv_kept_median": 0.5, "kv_pairs": 4, "measured_kv_bytes": None}  # fmt: skip
    line = gains_text(Gains.model_validate(gains))[0]
    assert "KV bytes per token 12.5% (8-bit entries, control 32; from the spec)" in line
    gains["measured_kv_bytes"] = {
        "share": 0.5,
        "bytes_per_entry": 11520.0,
        "control_bytes_per_entry": 23040.0,
        "pairs": 4,
        "bytes": 46080,
        "control_bytes": 92160,
    }
    line = gains_text(Gains.model_validate(gains))[0]
    assert "KV bytes 50.0% (engine-counted)" in line


def test_critical_and_lossless_have_distinct_marks(report: dict[str, Any]) -> None:
    table = terminal(report, 160)
    snapkv = table[table.index("snapkv-50 (eviction") : table.index("fp8-e4m3 (quantize)")]
    offload = table[table.index("offload-host (offload)") : table.index("prefix-reuse (")]
    assert " critical ★⚑ " in snapkv and " critical ★⚑ " in offload  # the workload's critical slice
    assert "task=needle ⚑" not in offload and " task=needle " in offload  # not every slice of a lossless arm
    assert "lossless: any candidate-only failure is a defect" in offload


def test_a_single_valued_column_is_not_repeated_in_the_tables(report: dict[str, Any]) -> None:
    single = copy.deepcopy(report)
    arm = single["arms"][0]
    everything = next(s for s in arm["slices"] if s["slice"] == "all")
    arm["slices"] += [
        everything | {"slice": "turns=1", "role": "signal", "gated": False},
        everything | {"slice": "task=needle/turns=1", "role": "signal", "gated": False},
    ]
    for shown in (terminal(single, 200), render(single, "md"), render(single, "html")):
        assert "turns=1" not in shown.replace("not in the table: turns=1", "")
        assert "not in the table: turns=1 and the slices nested with them" in shown
    assert text.single_valued(Arm.model_validate(arm)) == ["turns=1"]
    assert text.single_valued(Arm.model_validate(report["arms"][0])) == []


def test_html_tables_scroll_inside_themselves_on_a_narrow_screen(report: dict[str, Any]) -> None:
    html = render(report, "html")
    assert html.count("<table") == html.count('<div class="scroll"><table') > 0
    assert ".scroll { overflow-x: auto;" in html
