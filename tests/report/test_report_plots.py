"""The HTML plots: a CFR of 100% is drawn inside the axes, and arms never share one plot area."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvgate.cli import cli
from kvgate.report.document.arm import Arm
from kvgate.report.document.report import Report
from kvgate.report.render import plots


@pytest.fixture(scope="module")
def report(fixed_run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        CliRunner().invoke(cli, ["report", str(fixed_run), "--format", "json"]).stdout
    )
    return data


def test_a_cfr_of_100_percent_is_not_clipped(report: dict[str, Any]) -> None:
    arm = copy.deepcopy(report["arms"][0])
    critical = next(s for s in arm["slices"] if s["slice"] == "critical")
    critical |= {"cfr": 1.0, "cfr_lower": 0.68, "cfr_upper": 1.0}
    typed = Arm.model_validate(arm)
    assert plots.x_limit(typed.slices) > 1.0
    assert plots.x_limit(
        [typed.slices[0].model_copy(update={"cfr_upper": 0.2, "tau": 0.1})]
    ) == pytest.approx(0.22)
    svg = plots.cfr_by_slice(typed)
    assert svg.count('<g id="axes_') == 1 and "100%" in svg


def test_each_arm_gets_its_own_panel_in_the_context_plot(report: dict[str, Any]) -> None:
    svg = plots.cfr_by_context(Report.model_validate(report))
    assert svg is not None
    panels = len(re.findall(r'<g id="axes_\d+">', svg))
    assert panels == len(report["arms"]) == 5  # one per arm; the sixth cell of the 2 × 3 grid is not drawn


def test_divergences_all_at_token_0_get_an_integer_axis_and_say_so(report: dict[str, Any]) -> None:
    at_zero = copy.deepcopy(report)
    at_zero["arms"] = at_zero["arms"][:1]
    at_zero["arms"][0]["divergence"] |= {"diverged": 5, "bin_edges": [0, 1], "failed": [4], "passed": [1]}
    svg = plots.divergence(Report.model_validate(at_zero))
    assert svg is not None and "5/" in svg and "all at token 0" in svg
    ticks = re.findall(r"<!-- (-?\d+(?:\.\d+)?) -->", svg)  # matplotlib names each tick label's text
    assert ticks and all("." not in t for t in ticks), ticks
