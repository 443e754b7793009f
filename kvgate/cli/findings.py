"""What the stored counters say beyond the gate, checked by `kvgate run` and `kvgate report` alike.

- Isolation violated (a namespace that leaks, a reuse arm that never reused, KV from another
  namespace): the results are not evidence; exit 4 whatever the gate says.
- A lossless arm (prefix reuse, offload) run under load that diverged from the control: a defect; the
  gate fails (exit 1) unless the run already failed harder.
A served run also prints each arm's server counters (requests, retries, timeouts, preemptions).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kvgate.errors import EXIT_ENGINE_ERROR, EXIT_GATE_FAILED, EXIT_INCONCLUSIVE, EXIT_PASS

if TYPE_CHECKING:
    from kvgate.report.isolation import PassCounters


def exit_code_with_findings(
    run_dir: Path, code: int, quiet: bool, counters: PassCounters | None = None
) -> int:
    """`code` (the gate's) as the run's counters leave it; each finding is one line on stderr.
    `counters`: the rows' cache counters when the caller has read them already (the report has)."""
    from kvgate.report.isolation import isolation_violations
    from kvgate.runner.lossless import lossless_defects, server_summary

    if not quiet:
        for line in server_summary(run_dir):
            click.echo(f"kvgate: server: {line}", err=True)
    violations = isolation_violations(run_dir, counters)
    for violation in violations:
        click.echo(f"kvgate: error: isolation: {violation}", err=True)
    defects = lossless_defects(run_dir)
    for defect in defects:
        click.echo(f"kvgate: defect: {defect}", err=True)
    if violations:
        return EXIT_ENGINE_ERROR
    return EXIT_GATE_FAILED if defects and code in (EXIT_PASS, EXIT_INCONCLUSIVE) else code
