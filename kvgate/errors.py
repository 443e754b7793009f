"""Errors that the CLI turns into one line and an exit code, and the exit codes themselves."""

from __future__ import annotations

from pathlib import Path

EXIT_PASS = 0
EXIT_GATE_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INCONCLUSIVE = 3
EXIT_ENGINE_ERROR = 4
EXIT_INTERNAL = 70
"""A bug in kvgate (sysexits' EX_SOFTWARE): one line on stderr names the file holding the traceback."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT)."""


class KvgateError(Exception):
    """Base of every error kvgate reports to a user; `exit_code` is what the CLI exits with."""

    exit_code = EXIT_BAD_INPUT


class BadInput(KvgateError):
    """Malformed or inconsistent input: a file, a name, a spec, a policy. Exit 2."""

    exit_code = EXIT_BAD_INPUT


class EngineFailure(KvgateError):
    """An engine or the infrastructure under it failed. Exit 4."""

    exit_code = EXIT_ENGINE_ERROR


class TreatmentRefused(BadInput):
    """An engine cannot apply a treatment; raised before any generation."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C once a run's directory exists: `run_dir` is what `--resume` continues."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(str(run_dir))
        self.run_dir = run_dir
