"""Errors that the CLI turns into one line and an exit code (DESIGN.md, "Exit codes")."""

from __future__ import annotations

EXIT_PASS = 0
EXIT_GATE_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INCONCLUSIVE = 3
EXIT_ENGINE_ERROR = 4


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
