"""A fake-engine `kvgate run` (generation, stored parts, the control check, its report) imports neither
pandas nor any model library: pyarrow would import pandas for its own conversions (kvgate.arrow_build)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHECK = """
import sys
from click.testing import CliRunner
from kvgate.cli import cli
args = ["run", "--engine", "fake", "-w", sys.argv[2], "--limit", "4", "-o", sys.argv[1], "--quiet"]
result = CliRunner().invoke(cli, args)
assert result.exit_code in (0, 1, 3), result.output
print(",".join(m for m in ("pandas", "torch", "transformers", "sympy", "triton") if m in sys.modules))
"""


def test_a_fake_run_imports_no_pandas_and_no_model_library(tmp_path: Path, smoke_workload: Path) -> None:
    argv = [sys.executable, "-c", CHECK, str(tmp_path / "runs"), str(smoke_workload)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == "", f"imported: {out.stdout.strip()}"
