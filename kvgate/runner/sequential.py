"""Generating a sequential run look by look (gate.sequential, analysis.sequential).

Each look adds the next block of cases in the run's order: the control (and its A/A replicate) first,
then every candidate whose verdict is still open. Before the candidates of each look, a critical slice
that cannot pass even if every case the control has yet to generate passes is refused
(runner.control_check). After the block the report is built from the stored
rows, as `kvgate report` builds it; an arm whose verdict is final generates nothing more, and the control
stops with the last open candidate. Confirm-reruns follow for the cases generated. Everything a look
decides is a function of the stored rows and the manifest, so a resumed run skips the rows it has and
stops at the same looks.
"""

from __future__ import annotations

from kvgate.gate.sequential import look_ends
from kvgate.report.analysis.build import report_and_rows
from kvgate.report.analysis.run_data import read_cases
from kvgate.report.analysis.sequential import run_order
from kvgate.report.analysis.slices import slice_groups
from kvgate.report.document.report import Report
from kvgate.rundir.store import stored_keys
from kvgate.runner.context import RunContext
from kvgate.runner.control_check import refuse_unwinnable_on_control
from kvgate.runner.passes import ArmRun
from kvgate.runner.run import run_pass, run_reruns


def open_arms(report: Report, look: int) -> set[str]:
    """Candidates whose verdict is not final by `look` (1-based) in a report of the run so far."""
    still = set()
    for arm in report.arms:
        stopped_at = look + 1 if arm.sequential is None else arm.sequential.look
        if not (arm.decision in ("pass", "fail", "error") and stopped_at <= look):
            still.add(arm.arm)
    return still


def execute_sequential(ctx: RunContext) -> None:
    """Generate the run's rows look by look until every candidate's verdict is final."""
    ctx.done = stored_keys(ctx.run_dir)
    table = read_cases(ctx.manifest)
    groups, _ = slice_groups(table, ctx.policy)
    order = run_order(groups, ctx.policy, table.n, ctx.manifest["run_id"])
    candidates = {c.name: c for c in ctx.matrix.candidates}
    still = set(candidates)
    start = 0
    for look, end in enumerate(look_ends(table.n, ctx.policy.look_every), start=1):
        block = tuple(ctx.cases[int(i)] for i in order[start:end])
        start = int(end)
        run_pass(ctx, ArmRun(ctx.matrix.control, 0, 0, block))
        refuse_unwinnable_on_control(ctx.run_dir, ctx.matrix, ctx.cases, ctx.policy)
        if ctx.matrix.aa_replicate:
            run_pass(ctx, ArmRun(ctx.matrix.control, 1, 0, block))
        ctx.control_tokens = None  # the control's tokens for this block: read again
        for name in sorted(still, key=list(candidates).index):
            run_pass(ctx, ArmRun(candidates[name], 0, 0, block))
        report, _ = report_and_rows(ctx.run_dir, ctx.manifest, evidence=False)
        still &= open_arms(report, look)
        if not still:
            break
    run_reruns(ctx, ctx.matrix.candidates)
