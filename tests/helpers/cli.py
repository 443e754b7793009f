"""`kvgate ARGS…` in-process, as the tests call it."""

from __future__ import annotations

from click.testing import CliRunner, Result

from kvgate.cli import cli


def kvgate(*args: object) -> Result:
    """Run `kvgate` with `args` (each turned to text) in this process; click's Result, stdout and stderr
    kept apart."""
    return CliRunner().invoke(cli, [str(a) for a in args])
