"""The HTML report opened in headless Chromium (Debian's `chromium`): it renders, and each arm's verdict,
a failing example and the gains lie above the fold (the first 1600 px of a 1200 px wide window).

Skips when /usr/bin/chromium is absent (install: apt-get install -y chromium). Screenshots are written
to $KVGATE_SCREENSHOT_DIR when it is set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers.report_fixed_run import make_fixed_run

from kvgate.cli import cli
from kvgate.report.render.formats import render

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, FOLD = 1200, 1600
FAIL_RED = (0xC6, 0x28, 0x28)  # the FAIL badge and failing slices
PASS_GREEN = (0x2E, 0x7D, 0x32)
AMBER = (0xF9, 0xA8, 0x25)  # INCONCLUSIVE
SERIES_BLUE = (0x15, 0x65, 0xC0)  # the first arm's line in the CFR-by-context plot (inline SVG)
PROBE = """<script>
const bottom = (sel) =>
  Array.from(document.querySelectorAll(sel)).map((e) => e.getBoundingClientRect().bottom);
document.body.setAttribute("data-fold", JSON.stringify({
  verdicts: bottom("table.verdicts tbody tr"),
  gains: bottom(".card .gains"),
  example: bottom(".card .example"),
}));
</script></body>"""

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)


def chromium(tmp_path: Path, *args: str) -> str:
    out = subprocess.run(
        [
            str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={WIDTH},{FOLD}", *args,
        ],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return out.stdout


def screenshot(html: Path, tmp_path: Path, name: str) -> dict[Any, int]:
    """Colour counts of the first screen; the PNG is kept in $KVGATE_SCREENSHOT_DIR when set."""
    from PIL import Image

    png = tmp_path / f"{name}.png"
    chromium(tmp_path, f"--screenshot={png}", html.resolve().as_uri())
    if os.environ.get("KVGATE_SCREENSHOT_DIR"):
        Path(os.environ["KVGATE_SCREENSHOT_DIR"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(os.environ["KVGATE_SCREENSHOT_DIR"]) / png.name)
    image = Image.open(png).convert("RGB")
    assert image.size == (WIDTH, FOLD)
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200, "the page is (nearly) blank"
    return {rgb: n for n, rgb in colours}


def above_the_fold(html: Path, tmp_path: Path, arms: int, example: bool = True) -> None:
    """Every verdict row, and the first arm card's gains and failing example, end within the first screen."""
    probe = tmp_path / f"probe-{html.name}"
    probe.write_text(html.read_text(encoding="utf-8").replace("</body>", PROBE), encoding="utf-8")
    dom = chromium(tmp_path, "--dump-dom", probe.resolve().as_uri())
    found = re.search(r'data-fold="([^"]*)"', dom)
    assert found, "the layout probe did not run"
    fold: dict[str, list[float]] = json.loads(found.group(1).replace("&quot;", '"'))
    assert len(fold["verdicts"]) == arms and max(fold["verdicts"]) <= FOLD
    assert fold["gains"] and fold["gains"][0] <= FOLD
    if example:
        assert fold["example"] and fold["example"][0] <= FOLD


def test_fixed_run_renders_with_its_verdicts_above_the_fold(fixed_run: Path, tmp_path: Path) -> None:
    html = tmp_path / "fixed.html"
    result = CliRunner().invoke(cli, ["report", str(fixed_run), "--format", "html", "-o", str(html)])
    assert result.exit_code == 1, result.output
    counts = screenshot(html, tmp_path, "fixed")
    assert counts.get(FAIL_RED, 0) > 200, "the FAIL badge is missing: the styles did not render"
    assert counts.get(SERIES_BLUE, 0) > 50, "the inline SVG plot did not render"
    assert counts.get((255, 255, 255), 0) < 0.97 * WIDTH * FOLD
    above_the_fold(html, tmp_path, arms=5)


def test_three_arms_pass_fail_and_inconclusive(tmp_path: Path) -> None:
    run = make_fixed_run(
        tmp_path,
        policy_text="tau = 0.35\nconfidence = 0.9\nmin_control_passes = 5\n",
        fails={"snapkv-50": {0, 1, 2, 3, 4, 5, 30}, "fp8-e4m3": {0, 1}},
    )
    result = CliRunner().invoke(cli, ["report", str(run), "--format", "json"])
    report: dict[str, Any] = json.loads(result.stdout)
    report["arms"] = [a for a in report["arms"] if a["arm"] in ("offload-host", "snapkv-50", "fp8-e4m3")]
    assert sorted(a["decision"] for a in report["arms"]) == ["fail", "inconclusive", "pass"]
    html = tmp_path / "three-arms.html"
    html.write_text(render(report, "html"), encoding="utf-8")
    counts = screenshot(html, tmp_path, "three-arms")
    for colour in (FAIL_RED, PASS_GREEN, AMBER):
        assert counts.get(colour, 0) > 200, f"a verdict badge of colour {colour} is missing"
    above_the_fold(html, tmp_path, arms=3)


def test_default_run_on_the_fake_engine(smoke_workload: Path, tmp_path: Path) -> None:
    html = tmp_path / "default.html"
    ran = CliRunner().invoke(
        cli, ["run", "--engine", "fake", "-w", str(smoke_workload), "-o", str(tmp_path / "runs"), "--quiet"]
    )
    (run,) = list((tmp_path / "runs").iterdir())
    result = CliRunner().invoke(cli, ["report", str(run), "--format", "html", "-o", str(html)])
    assert result.exit_code == ran.exit_code == 3, result.output
    counts = screenshot(html, tmp_path, "default")
    assert counts.get(AMBER, 0) > 200
    page = html.read_text(encoding="utf-8")
    assert page.index('class="verdicts"') < page.index('class="cards"') < page.index("<figure")
    above_the_fold(html, tmp_path, arms=2, example=False)  # the default run has no cache-induced failure
