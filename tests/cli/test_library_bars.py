"""Library progress bars (transformers' GGUF conversion, huggingface_hub's downloads) are off in a kvgate
command's process unless the user asked for them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvgate.cli import cli
from kvgate.cli.library_bars import SWITCHES
from kvgate.cli.one_shot import PROCESS

ROOT = Path(__file__).resolve().parents[2]
SHOW_BARS = """
from kvgate.cli.library_bars import hide_library_progress_bars
print(sorted(hide_library_progress_bars()))
from tqdm.auto import tqdm
from huggingface_hub.utils import are_progress_bars_disabled
for _ in tqdm(range(3), desc="planted bar"):
    pass
print(are_progress_bars_disabled())
"""


def _show_bars(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    return subprocess.run(
        [sys.executable, "-c", SHOW_BARS], capture_output=True, text=True, cwd=ROOT, check=True, timeout=120,
        env={**clean, "PYTHONPATH": str(ROOT), **env},
    )  # fmt: skip


def test_bars_are_off_before_the_libraries_load() -> None:
    done = _show_bars()
    assert done.stdout.splitlines() == ["['HF_HUB_DISABLE_PROGRESS_BARS', 'TQDM_DISABLE']", "True"]
    assert "planted bar" not in done.stderr


def test_a_users_own_setting_is_kept() -> None:
    done = _show_bars(TQDM_DISABLE="", HF_HUB_DISABLE_PROGRESS_BARS="0")  # tqdm: any non-empty text is on
    assert done.stdout.splitlines() == ["[]", "False"]
    assert "planted bar" in done.stderr


@pytest.mark.parametrize(
    ("args", "hidden"),
    [
        (["freeze", "nosuchsuite", "-o", "w.parquet"], True),
        (["freeze", "nosuchsuite", "-o", "w.parquet", "--verbose"], False),
        (["run", "--engine", "fake", "-w", "nosuch.parquet"], True),
        (["run", "--engine", "fake", "-w", "nosuch.parquet", "--verbose"], False),
    ],
)
def test_freeze_and_run_hide_them_in_their_own_process(
    args: list[str], hidden: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Only as the console's process (a test's in-process call leaves the environment alone), and with
    `--verbose` not at all."""
    calls: list[str] = []
    monkeypatch.setattr("kvgate.cli.library_bars.hide_library_progress_bars", lambda: calls.append("hidden"))
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(cli, args, obj=PROCESS).exit_code == 2
    assert calls == (["hidden"] if hidden else [])
    assert CliRunner().invoke(cli, args).exit_code == 2
    assert calls == (["hidden"] if hidden else [])
