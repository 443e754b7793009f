"""`kvgate ARGS…` in-process, as the tests call it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from kvgate.cli import cli


def kvgate(*args: object) -> Result:
    """Run `kvgate` with `args` (each turned to text) in this process; click's Result, stdout and stderr
    kept apart."""
    return CliRunner().invoke(cli, [str(a) for a in args])


def finished_fake_run(root: Path) -> Path:
    """`root/run`: a complete fake-engine run of 2 smoke cases (the control and fp8-e4m3, no A/A), its
    workload `root/w.parquet` and matrix `root/m.toml` beside it."""
    assert kvgate("freeze", "smoke", "--limit", "2", "-o", root / "w.parquet").exit_code == 0
    matrix = '[matrix]\ncontrol = "full"\ncandidates = ["fp8-e4m3"]\naa_replicate = false\n'
    (root / "m.toml").write_text(matrix)
    ran = kvgate(
        "run", "--engine", "fake", "-w", root / "w.parquet", "-m", root / "m.toml", "--run-dir", root / "run"
    )
    assert ran.exit_code in (0, 1, 3), ran.output
    return root / "run"
