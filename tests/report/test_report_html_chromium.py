"""The HTML report opened in headless Chromium (Debian's `chromium`) and screenshotted: it renders.

Skips when /usr/bin/chromium is absent (install: apt-get install -y chromium).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvgate.cli import cli

CHROMIUM = Path("/usr/bin/chromium")
FAIL_RED = (0xC6, 0x28, 0x28)  # the FAIL badge and failing slices
SERIES_BLUE = (0x15, 0x65, 0xC0)  # the first arm's line in the CFR-by-context plot (inline SVG)


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
def test_html_report_renders_in_headless_chromium(fixed_run: Path, tmp_path: Path) -> None:
    from PIL import Image

    html = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["report", str(fixed_run), "--format", "html", "-o", str(html)])
    assert result.exit_code == 1, result.output
    png = tmp_path / "shot.png"
    subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={png}",
            "--window-size=1200,1600",
            html.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    image = Image.open(png).convert("RGB")
    assert image.size == (1200, 1600)
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200, "the page is (nearly) blank"
    counts = {rgb: n for n, rgb in colours}
    assert counts.get(FAIL_RED, 0) > 200, "the FAIL badge is missing: the styles did not render"
    assert counts.get(SERIES_BLUE, 0) > 50, "the inline SVG plot did not render"
    white = counts.get((255, 255, 255), 0)
    assert white < 0.97 * 1200 * 1600
