"""Reading a frozen workload (every `kvgate run` does it before its first generation) must not import
pandas: pyarrow's own `to_numpy` on the token ids did, for ≈0.3 CPU-s of start-up
(bench/first_generation.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kvgate.workload.freeze import freeze
from kvgate.workload.tokenizer import WordTokenizer

CHECK = """
import sys
from kvgate.workload.schema import read_workload
from pathlib import Path
cases = read_workload(Path(sys.argv[1])).cases
assert any(c.prompt_token_ids for c in cases)
print("pandas" in sys.modules)
"""


def test_reading_a_workload_imports_no_pandas(tmp_path: Path) -> None:
    workload = tmp_path / "w.parquet"
    freeze(["smoke"], workload, WordTokenizer(), seed=0)
    out = subprocess.run(
        [sys.executable, "-c", CHECK, str(workload)], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "False"
