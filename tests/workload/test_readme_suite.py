"""The suite example in README.md freezes as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kvgate.paths import REPO_ROOT
from kvgate.workload.freeze import freeze_cases
from kvgate.workload.suites import parse_suite
from kvgate.workload.tokenizer import WordTokenizer


def test_readme_suite_example_freezes(tmp_path: Path) -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    (example,) = re.findall(r"```toml\n(.*?)```", readme, re.S)
    (tmp_path / "my-suite.toml").write_text(example)
    (tmp_path / "traces").mkdir()
    request = {"messages": [{"role": "user", "content": "What is 2+2?"}], "expected": "4"}
    (tmp_path / "traces" / "support.jsonl").write_text(json.dumps(request) + "\n")
    cases = freeze_cases([parse_suite(tmp_path / "my-suite.toml")], WordTokenizer(), seed=0)
    assert {c.task for c in cases} == {"trace", "niah_multikey"}
    assert len(cases) == 1 + 3 * 20
