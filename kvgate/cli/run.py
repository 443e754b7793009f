"""`kvgate run`: the matrix on a workload, results stored, report printed, exit with the gate's code."""

from __future__ import annotations

from pathlib import Path

import click

from kvgate.cli.options import parse_engine_options


@click.command()
@click.option("-w", "--workload", type=click.Path(path_type=Path), default=None, help="Frozen workload Parquet.")
@click.option("-m", "--matrix", default="default", show_default=True, help="Matrix name or TOML file.")
@click.option("--engine", default="hf", show_default=True, help="hf | vllm | fake")
@click.option("--model", default="smollm2-135m", show_default=True, help="Model name or local folder.")
@click.option("--policy", type=click.Path(path_type=Path), default=None, help="Gate policy TOML.")
@click.option("-o", "--runs-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True)
@click.option("--resume", type=click.Path(path_type=Path), default=None, help="Continue this run directory.")
@click.option("--limit", type=int, default=None, help="Run this many cases, spread over the workload.")
@click.option("-E", "engine_options", multiple=True, help="Engine option key=value (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--quiet", is_flag=True, help="No progress and no table; only the exit code speaks.")
@click.pass_context
def run(
    ctx: click.Context,
    workload: Path | None,
    matrix: str,
    engine: str,
    model: str,
    policy: Path | None,
    runs_dir: Path,
    resume: Path | None,
    limit: int | None,
    engine_options: tuple[str, ...],
    as_json: bool,
    quiet: bool,
) -> None:
    """Run every case under the control and each candidate arm, then gate."""
    from kvgate.cli.report import emit
    from kvgate.report.model import build_report
    from kvgate.runner.job import RunOptions, run_job

    opts = RunOptions(
        workload=workload,
        matrix=matrix,
        engine=engine,
        model=model,
        policy=policy,
        runs_dir=runs_dir,
        resume=resume,
        limit=limit,
        engine_options=parse_engine_options(engine_options),
    )
    progress = None
    if not (quiet or as_json):
        from kvgate.cli.progress import RichProgress

        progress = RichProgress()
    run_dir = run_job(opts, progress)
    report = build_report(run_dir)
    if not quiet:
        emit(report, "json" if as_json else "table", None)
        if not as_json:
            click.echo(f"results: {run_dir}", err=True)
    ctx.exit(report["exit_code"])
