"""`kvgate --help` imports neither torch nor vllm (nor pandas/pyarrow), so it starts fast."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "vllm", "transformers", "pandas", "pyarrow")


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from kvgate.cli import cli\n"
        "try:\n    cli(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Commands:" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "HEAVY:"
