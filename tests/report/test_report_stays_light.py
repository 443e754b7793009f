"""`kvgate report --format json` must not import pandas, scipy.stats or matplotlib: each costs more CPU
than building the report of a million rows (bench/bench_report.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHECK = """
import sys
from click.testing import CliRunner
from kvgate.cli import cli
result = CliRunner().invoke(cli, ["report", sys.argv[1], "--format", "json"])
assert result.exit_code == 1, result.output
print(",".join(m for m in ("pandas", "scipy.stats", "matplotlib", "statsmodels") if m in sys.modules))
"""


def test_json_report_imports_no_heavy_modules(fixed_run: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHECK, str(fixed_run)], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "", f"imported: {out.stdout.strip()}"
