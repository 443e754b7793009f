"""`kvgate run`: the matrix on a workload, results stored, report printed, exit with the gate's code.

Exit codes: the report's (0 pass, 1 gate failed, 3 inconclusive, 4 engine errors), except that a run
whose cache counters contradict an arm (a namespace that leaks, a reuse arm that never reused) exits 4
whatever the gate says: its results are not evidence. Bad input exits 2 before anything is generated; a
failed engine or a full disk exits 4 with the rows stored so far intact, to be continued with --resume.
`--json` prints the report JSON and nothing else on stdout (library chatter goes to stderr).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kvgate.cli.options import MODEL_TAKES, PATH, parse_engine_options
from kvgate.engines.registry import DEFAULT_ENGINE, ENGINES
from kvgate.executors.registry import DEFAULT_EXECUTOR, EXECUTORS

if TYPE_CHECKING:
    from kvgate.cli.engine_log import EngineLog
    from kvgate.runner.context import Executor
    from kvgate.runner.job import RunOptions

FILE_SUFFIXES = frozenset({".json", ".md", ".html", ".xml", ".parquet", ".toml"})
"""Suffixes of the files kvgate reads or writes (reports, workloads, specs): a runs folder that does not
exist yet named with one is taken for a file meant."""


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything written to stdout, by Python or by native code, to stderr for the block."""
    sys.stdout.flush()
    try:
        out_fd, err_fd = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        out_fd = err_fd = -1
    saved = os.dup(out_fd) if out_fd >= 0 else -1
    if saved >= 0:
        os.dup2(err_fd, out_fd)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved >= 0:
            sys.stdout.flush()
            os.dup2(saved, out_fd)
            os.close(saved)


@click.command()
@click.option("-w", "--workload", type=PATH, default=None, help="Frozen workload Parquet.")
@click.option("-m", "--matrix", default=None, help="Matrix name or TOML file.  [default: default]")
@click.option(
    "--arms", default=None, help="Run and gate only these candidates of the matrix (comma-separated)."
)
@click.option(
    "--engine",
    default=None,
    help=f"{' | '.join(ENGINES.names())}  [default: $KVGATE_ENGINE, else {DEFAULT_ENGINE}]",
)
@click.option(
    "--model", default=None,
    help=f"The model: {MODEL_TAKES}.  [default: $KVGATE_MODEL, else smollm2-135m]",
)  # fmt: skip
@click.option("--policy", type=PATH, default=None, help="Gate policy TOML.")
@click.option(
    "--tau", type=click.FloatRange(0, 1), default=None,
    help="The policy's tau (over --policy, or the default); the result is stored as the declared policy.",
)  # fmt: skip
@click.option(
    "--critical", "critical", multiple=True,
    help="A slice gated beside all, column=value (repeatable); replaces the policy's critical list.",
)  # fmt: skip
@click.option(
    "--policy-unsafe-reason", default=None,
    help="Why a policy below the safety floor (confidence < 0.8, rule = point) is used; stored and reported.",
)  # fmt: skip
@click.option(
    "-o", "--runs-dir", type=PATH, default=None,
    help="Where a new run's directory is made: <runs-dir>/<UTC time>-<spec hash>.  "
    "[default: $KVGATE_RUNS, else runs]",
)  # fmt: skip
@click.option(
    "--run-dir", type=PATH, default=None,
    help="Make the new run exactly here (a new or empty directory), for scripts that need a known path.",
)  # fmt: skip
@click.option(
    "--resume",
    type=PATH,
    default=None,
    help="Continue this run directory; inputs come from its manifest, and any given must match them.",
)
@click.option("--limit", type=int, default=None, help="Run this many cases, spread over the workload.")
@click.option("-E", "engine_options", multiple=True, help="Engine option key=value (repeatable).")
@click.option(
    "--endpoint", "endpoints", multiple=True,
    help="ARM=URL of a deployed OpenAI-compatible server (repeatable, *=URL for all); means --engine server.",
)  # fmt: skip
@click.option(
    "--executor", type=click.Choice(EXECUTORS.names()), default=DEFAULT_EXECUTOR, show_default=True,
    help="Where rows are generated: this process, or the workers of a Ray cluster (docs/ray.md).",
)  # fmt: skip
@click.option(
    "--ray-address", default=None, help="Ray cluster to join (default: RAY_ADDRESS, else a new local one)."
)
@click.option(
    "--ray-workers", type=int, default=None, help="Engines at once on Ray (default: as the cluster holds)."
)
@click.option(
    "--verbose", is_flag=True,
    help="Show the engine's output (library warnings, load bars) instead of keeping it in <run>/engine.log.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print only the report JSON on stdout.")
@click.option(
    "--quiet", is_flag=True,
    help="No progress and no table: one line naming the run directory, then only the exit code (and errors).",
)  # fmt: skip
@click.pass_context
def run(
    ctx: click.Context,
    workload: Path | None,
    matrix: str | None,
    arms: str | None,
    engine: str | None,
    model: str | None,
    policy: Path | None,
    tau: float | None,
    critical: tuple[str, ...],
    policy_unsafe_reason: str | None,
    runs_dir: Path | None,
    run_dir: Path | None,
    resume: Path | None,
    limit: int | None,
    engine_options: tuple[str, ...],
    endpoints: tuple[str, ...],
    executor: str,
    ray_address: str | None,
    ray_workers: int | None,
    verbose: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Run every case under the control and each candidate arm, then gate.

    Every run is new: its directory is printed when it starts. `--resume DIR` continues one.
    """
    from kvgate.cli.library_bars import hide_library_progress_bars
    from kvgate.cli.one_shot import PROCESS
    from kvgate.cli.policy_flags import declared_policy
    from kvgate.engines.server.endpoints import with_endpoints
    from kvgate.errors import BadInput
    from kvgate.executors.registry import executor_for
    from kvgate.runner.job import RunOptions

    if ctx.obj is PROCESS and not verbose:
        hide_library_progress_bars()
    if as_json and quiet:  # else neither the report nor the run's directory was printed
        raise BadInput("--json prints the report JSON and --quiet prints no report: give one of them")
    if resume is None:  # a resumed run takes its engine and model from its manifest, never the environment
        # an explicit value, even an empty one (refused below), wins over the environment
        engine = engine if engine is not None else env_default("KVGATE_ENGINE")
        model = model if model is not None else env_default("KVGATE_MODEL")
    if resume is not None and runs_dir is not None:  # else ignored: the run stays where it is
        raise BadInput(
            f"-o names where a new run is made; --resume continues {resume} where it is: leave -o out"
        )
    runs_dir = runs_dir or Path(env_default("KVGATE_RUNS") or "runs")
    if resume is None:
        _refuse_inside_a_run(run_dir.parent if run_dir is not None else runs_dir)
        _refuse_a_file_for_the_folder(run_dir, runs_dir)
    if workload is not None:
        from kvgate.cli.run_as_workload import refuse_run_as_workload

        refuse_run_as_workload(workload, "-w", resume=resume is None)

    engine, options = with_endpoints(
        engine, parse_engine_options(engine_options) if engine_options else None, endpoints
    )
    with tempfile.TemporaryDirectory(prefix="kvgate-arms-") as folder:
        if arms is not None:
            matrix = _arms_matrix(matrix, arms, resume, Path(folder))
        if resume is None:
            _refuse_incapable(engine, matrix, options)
        elif tau is not None or critical:
            raise BadInput("--tau and --critical declare a new run's policy; a resumed run keeps its own")
        policy = declared_policy(policy, tau, critical, Path(folder))
        opts = RunOptions(
            workload=workload,
            matrix=matrix,
            engine=engine,
            model=model,
            policy=policy,
            policy_unsafe_reason=policy_unsafe_reason,
            runs_dir=runs_dir,
            run_dir=run_dir,
            resume=resume,
            limit=limit,
            engine_options=options,
        )
        _run(ctx, opts, executor_for(executor, ray_address, ray_workers), as_json, quiet, verbose)


def _refuse_inside_a_run(folder: Path) -> None:
    """A new run is never made inside another run's folder (`-o RUN` made RUN/<new run>)."""
    from kvgate.cli.output_path import run_around
    from kvgate.errors import BadInput

    run = run_around(folder)
    if run is not None:
        where = "a run" if run == folder else f"inside run {run}"
        raise BadInput(
            f"{folder} is {where}, not a folder of runs: a new run goes beside it "
            f"(-o {run.parent}), or continue that one with --resume {run}"
        )


def _refuse_a_file_for_the_folder(run_dir: Path | None, runs_dir: Path) -> None:
    """A new run's folder (--run-dir), or the folder it is made in (-o, $KVGATE_RUNS), that is a file is
    refused before any work, saying what the option names (`run -o report.json` took it for the file the
    report is written to); so is either folder, yet to be made, named like a file (`FILE_SUFFIXES`)."""
    from kvgate.errors import BadInput

    if run_dir is not None and os.path.lexists(run_dir) and not run_dir.is_dir():
        raise BadInput(
            f"--run-dir {run_dir} is not a folder: it names the new run's folder; name a new or empty one"
        )
    if run_dir is None and os.path.lexists(runs_dir) and not runs_dir.is_dir():
        raise BadInput(
            f"{runs_dir} is not a folder: -o (or $KVGATE_RUNS) names the folder new runs are made in; name a "
            "folder (`kvgate report RUN -o FILE` writes a run's report to a file)"
        )
    if run_dir is not None and not os.path.lexists(run_dir) and run_dir.suffix.lower() in FILE_SUFFIXES:
        raise BadInput(  # else a folder named report.json/ held the run
            f"--run-dir {run_dir} is named like a file ({run_dir.suffix}), but it names the new run's "
            "folder: name a folder (`kvgate report RUN -o FILE` writes a run's report)"
        )
    if run_dir is None and not os.path.lexists(runs_dir) and runs_dir.suffix.lower() in FILE_SUFFIXES:
        raise BadInput(  # else a folder named report.json/ was made, the run inside it
            f"{runs_dir} is named like a file ({runs_dir.suffix}), but -o (or $KVGATE_RUNS) names the folder "
            "new runs are made in: name a folder (`kvgate report RUN -o FILE` writes a run's report)"
        )


def env_default(name: str) -> str | None:
    """A default from the environment (KVGATE_ENGINE, KVGATE_MODEL, KVGATE_RUNS); unset or blank: None."""
    value = os.environ.get(name, "").strip()
    return value or None


def _arms_matrix(matrix: str | None, arms: str, resume: Path | None, folder: Path) -> str:
    """The matrix file of `--arms`: the matrix (or the default one) with only those candidates."""
    from kvgate.cli.arm_subset import parse_arms, subset_matrix
    from kvgate.errors import BadInput
    from kvgate.treatments.matrix import DEFAULT_MATRIX

    if resume is not None:
        raise BadInput(
            "--arms cannot be combined with --resume: a resumed run keeps the arms it started with"
        )
    return subset_matrix(matrix or DEFAULT_MATRIX, parse_arms(arms), folder)


def _refuse_incapable(engine: str | None, matrix: str | None, options: dict[str, Any] | None) -> None:
    """An engine option the engine does not take, then an arm the engine's table says it cannot run,
    refused before the heavy runner is imported."""
    from kvgate.engines.capability import check_capable
    from kvgate.engines.options import check_engine_options
    from kvgate.engines.registry import DEFAULT_ENGINE, ENGINES
    from kvgate.treatments.matrix import DEFAULT_MATRIX, resolve_matrix

    name = engine or DEFAULT_ENGINE
    if name in ENGINES:  # an unknown name is refused with "did you mean" later
        check_engine_options(name, options or {})
        check_capable(name, resolve_matrix(matrix or DEFAULT_MATRIX))


def _run(
    ctx: click.Context, opts: RunOptions, executor: Executor, as_json: bool, quiet: bool, verbose: bool
) -> None:
    """Generate on `executor` (look by look when the policy is sequential), engine output kept in the
    run's `engine.log` unless `verbose`; then report and exit with the gate's code."""
    from kvgate.cli.engine_log import engine_output_to_log
    from kvgate.runner.job import run_job

    with engine_output_to_log(verbose) as log:
        announce = functools.partial(_announce, log, as_json or opts.resume is not None)
        notice = functools.partial(_notice, log)
        if quiet or as_json:
            with stdout_to_stderr():
                run_dir = run_job(opts, executor, announce=announce, notice=notice)
        else:
            from kvgate.cli.progress import progress_for_stderr

            with progress_for_stderr(log.terminal) as progress:
                run_dir = run_job(opts, executor, progress, announce=announce, notice=notice)
    ctx.exit(_report(run_dir, as_json, quiet))


def _announce(log: EngineLog, silent: bool, run_dir: Path) -> None:
    """Engine output into the run directory; a new run's directory named before any generation (what
    to --resume after a crash) unless `silent`."""
    log.attach(run_dir)
    if not silent:
        print(
            f"kvgate: run {run_dir} (after an interruption: kvgate run --resume {run_dir})", file=log.terminal
        )


def _notice(log: EngineLog, line: str) -> None:
    """A choice kvgate made for the user (the default workload), or a warning, on stderr whatever the
    flags."""
    print(f"kvgate: {line}", file=log.terminal)


def _report(run_dir: Path, as_json: bool, quiet: bool) -> int:
    """Print the report (unless quiet); return the exit code, with what the counters say
    (`cli.findings`)."""
    from kvgate.cli.findings import exit_code_with_findings
    from kvgate.cli.report import emit
    from kvgate.report.analysis.build import verified_report

    report, rows = verified_report(run_dir)
    if not quiet:
        emit(report, "json" if as_json else "table", None)
        if not as_json:
            click.echo(f"results: {run_dir}", err=True)
    return exit_code_with_findings(run_dir, report, quiet, rows.counters())
