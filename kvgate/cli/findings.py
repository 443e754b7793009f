"""What the stored counters say beyond the gate, checked by `kvgate run` and `kvgate report` alike.

- Isolation violated (a namespace that leaks, a reuse arm that never reused, KV from another
  namespace): the results are not evidence; exit 4 whatever the gate says.
- No proof of treatment (an arm whose counters do not show its treatment ran: FP8 not applied, eviction
  keeping more than its ratio allows, an offload tier never written or never read back, reuse that never
  hit, `analysis.proof`): the report already makes the arm an error (exit 4 unless another arm fails);
  each arm's missing evidence is one line here.
- A lossless arm (prefix reuse, offload) run under load that diverged from the control: a defect; the
  gate fails (exit 1) unless the run already failed harder.
A served or scheduled run also prints each arm's counters (requests, retries, timeouts, preemptions,
the stress schedules' counts).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kvgate.errors import EXIT_ENGINE_ERROR, EXIT_GATE_FAILED, EXIT_INCONCLUSIVE, EXIT_PASS

if TYPE_CHECKING:
    from kvgate.report.analysis.isolation import PassCounters
    from kvgate.report.document.report import Report


def exit_code_with_findings(
    run_dir: Path, report: Report, quiet: bool, counters: PassCounters | None = None
) -> int:
    """The exit code of `report` (the gate's) as the run's counters leave it; each finding is one line on
    stderr. The proofs of treatment are the report's own (`arms[].proof`, analysis.proof); `counters`:
    the rows' cache counters when the caller has read them already (the report has)."""
    from kvgate.report.analysis.isolation import isolation_violations
    from kvgate.report.analysis.proof import missing_proofs
    from kvgate.runner.lossless import lossless_defects, server_summary

    if not quiet:
        for line in server_summary(run_dir):
            click.echo(f"kvgate: load: {line}", err=True)
    code = int(report.exit_code)
    violations = isolation_violations(run_dir, counters)
    for violation in violations:
        click.echo(f"kvgate: error: isolation: {violation}", err=True)
    unproven = missing_proofs({a.arm: a.proof.model_dump() for a in report.arms if a.proof is not None})
    for line in unproven:
        click.echo(f"kvgate: error: proof: {line}", err=True)
    defects = lossless_defects(run_dir)
    for defect in defects:
        click.echo(f"kvgate: defect: {defect}", err=True)
    if violations:
        return EXIT_ENGINE_ERROR
    return EXIT_GATE_FAILED if defects and code in (EXIT_PASS, EXIT_INCONCLUSIVE) else code
