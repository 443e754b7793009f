"""What the kill -9 test starts in a process of its own: `kvgate ARGV…`, output discarded."""

from __future__ import annotations

import os
import sys

from kvgate.cli import main


def run_cli(argv: list[str], cwd: str) -> None:
    """`kvgate ARGV…` in `cwd` (a multiprocessing target)."""
    os.chdir(cwd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.argv = ["kvgate", *argv]
    main()
