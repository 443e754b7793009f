"""Goldens of every renderer on the fixed run (fixed-width Console, no colour), kept as the example
reports in every format under the checkout's `reports/examples/`.

Volatile fields (run id, creation time, workload hash, versions) are normalised first, floats rounded to
10 significant digits (test_report_hand_computed.py checks exact values), and the HTML's SVG bodies are
replaced by a placeholder (they depend on the matplotlib version). To accept a deliberate change:
KVGATE_UPDATE_GOLDENS=1 pytest tests/report/test_report_goldens.py, then review the diff.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers.report_fixed_run import make_fixed_run
from helpers.report_schema import report_json
from rich.console import Console

from kvgate.cli import cli
from kvgate.report.document.report import Report
from kvgate.report.render.formats import render
from kvgate.report.render.table import render_terminal

GOLDENS = Path(__file__).resolve().parents[2] / "reports" / "examples"
UPDATE = os.environ.get("KVGATE_UPDATE_GOLDENS") == "1"


def rounded(value: Any) -> Any:
    """Floats to 10 significant digits: the last bits differ between scipy builds, not the meaning."""
    if isinstance(value, float):
        return float(f"{value:.10g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


RUN_ID = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[0-9a-f]{12}")
"""A run id: the time a run was made differs between runs of the same spec."""


def normalised(report: dict[str, Any]) -> dict[str, Any]:
    text = RUN_ID.sub("<run_id>", json.dumps(rounded(report)))
    text = text.replace(report["run"]["workload_sha256"], "<sha>")
    data: dict[str, Any] = json.loads(text)
    data["kvgate_version"] = data["run"]["kvgate_version"] = "<version>"
    data["run"]["created_at"] = "<created_at>"
    return data


def placeheld(data: dict[str, Any]) -> Report:
    """The normalised report as a model: read with values its run id and hash patterns take, then the
    placeholders put back (a copy with changed fields is not checked again)."""
    stand_in = {"run_id": "20000101T000000.000Z-000000000000", "workload_sha256": "0" * 64}
    run = data["run"] | stand_in
    compare = data.get("compare")
    runs = (
        {}
        if compare is None
        else {k: compare[k] | {"run_id": stand_in["run_id"]} for k in ("current", "baseline")}
    )
    report = Report.model_validate(data | {"run": run} | ({"compare": compare | runs} if compare else {}))
    held = {"run": report.run.model_copy(update={k: data["run"][k] for k in stand_in})}
    if report.compare is not None:
        ids = {
            k: getattr(report.compare, k).model_copy(update={"run_id": compare[k]["run_id"]}) for k in runs
        }
        held["compare"] = report.compare.model_copy(update=ids)
    return report.model_copy(update=held)


def report_of(run: Path, *args: str) -> Report:
    result = CliRunner().invoke(cli, ["report", str(run), "--format", "json", *args])
    assert result.exit_code in (0, 1, 3, 4), result.output
    return placeheld(normalised(report_json(result.stdout)))


def terminal(report: Report) -> str:
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=120, color_system=None, legacy_windows=False))
    return buf.getvalue()


def strip_svg(html: str) -> str:
    return re.sub(r"<svg\b.*?</svg>", "<svg/>", html, flags=re.DOTALL)


def check(name: str, text: str) -> None:
    text = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    path = GOLDENS / name
    if UPDATE or not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"golden {name} was missing and has been written; review it and run again")
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden"


@pytest.fixture(scope="module")
def report(fixed_run: Path) -> Report:
    return report_of(fixed_run)


def test_terminal_golden(report: Report) -> None:
    check("fixed.table.txt", terminal(report))


def test_markdown_golden(report: Report) -> None:
    check("fixed.md", render(report, "md"))


def test_junit_golden(report: Report) -> None:
    check("fixed.junit.xml", render(report, "junit"))


def test_json_golden(report: Report) -> None:
    check("fixed.json", render(report, "json"))


def test_html_golden_and_its_plots(report: Report) -> None:
    html = render(report, "html")
    svgs = re.findall(r"<svg\b.*?</svg>", html, flags=re.DOTALL)
    assert len(svgs) == 2 + len(report.arms)  # CFR by context, divergence, one CFR-per-slice plot per arm
    assert all("<path" in svg for svg in svgs)
    assert "http://" not in strip_svg(html) and "https://" not in strip_svg(html)  # self-contained
    check("fixed.html", strip_svg(html))


def test_compare_goldens(fixed_run: Path, tmp_path: Path) -> None:
    worse = make_fixed_run(tmp_path, fails={"offload-host": {10, 47}, "fp8-e4m3": {20, 46}})
    report = report_of(worse, "--compare", str(fixed_run))
    table = terminal(report)
    top = table.index("compared with run")  # the regressions, right under the verdicts
    check(
        "compare.table.txt",
        table[top : table.index("\n\n", top)] + "\n…\n" + table[table.rindex("compared") :],
    )
    md = render(report, "md")
    check("compare.md", md[md.index("### Comparison") :])
