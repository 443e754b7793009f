"""`kvgate freeze SUITE... -o FILE` and `kvgate freeze --check FILE`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kvgate.cli.options import MODEL_TAKES, PATH, was_given
from kvgate.seeds import MAX_SEED
from kvgate.workload.checks import MAX_CASES

if TYPE_CHECKING:
    from kvgate.workload.case import Case


@click.command()
@click.argument("suites", nargs=-1)
@click.option("-o", "--output", type=PATH, help="Workload Parquet to write.")
@click.option(
    "--model", default=None,
    help=f"Freeze the prompts as this model's token ids: {MODEL_TAKES}.  [default: kvgate's word tokenizer, "
    "for --engine fake]",
)  # fmt: skip
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=0, show_default=True)
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_CASES),
    default=None,
    help="Keep this many cases, spread over the suites.",
)
@click.option("--check", "check", type=PATH, default=None, help="Verify a workload file.")
@click.option(
    "--verbose", is_flag=True, help="Show the libraries' progress bars (a model's conversion or download)."
)
@click.pass_context
def freeze(
    ctx: click.Context,
    suites: tuple[str, ...],
    output: Path | None,
    model: str | None,
    seed: int,
    limit: int | None,
    check: Path | None,
    verbose: bool,
) -> None:
    """Freeze SUITES (names or TOML files) into a versioned, hashed Parquet workload."""
    from kvgate.cli.library_bars import hide_library_progress_bars
    from kvgate.cli.one_shot import PROCESS
    from kvgate.errors import BadInput

    if ctx.obj is PROCESS and not verbose:
        hide_library_progress_bars()

    if check is not None:
        from kvgate.workload.schema import read_workload

        if suites or output is not None:  # else the suites would not be frozen, nor -o written
            raise BadInput(
                "--check FILE verifies a frozen workload and freezes nothing: give it alone, or freeze "
                "SUITES -o FILE without --check (freezing checks what it writes)"
            )
        ignored = [f"--{name}" for name in ("model", "seed", "limit") if was_given(ctx, name)]
        if ignored:  # else they were ignored: the file is checked as it was frozen
            raise BadInput(
                f"--check FILE verifies the workload as it was frozen; {ignored[0]} applies only to freezing "
                "SUITES: leave it out"
            )

        from kvgate.cli.run_as_workload import refuse_run_as_workload

        refuse_run_as_workload(check, "--check")
        workload = read_workload(check)
        click.echo(
            f"{check}: ok — {len(workload.cases)} cases, schema_version {workload.meta['schema_version']}, "
            f"tokenizer {workload.meta.get('tokenizer')}, sha256 {workload.sha256}"
        )
        _show_clusters(workload.cases)
        return
    if not suites or output is None:
        raise BadInput("give one or more SUITE names and -o FILE (or --check FILE)")
    _check_suite_names(suites)
    from kvgate.cli.output_path import check_output_file

    check_output_file(output, "a workload", whole=True)
    from kvgate.workload.freeze import freeze as freeze_suites
    from kvgate.workload.suites import resolve_suite
    from kvgate.workload.tokenizer import PromptTokenizer, WordTokenizer

    named: dict[str, str] = {}
    for given in suites:  # unknown names fail before a tokenizer is loaded
        name = resolve_suite(given).name
        if name in named:  # else "duplicate case_id" after freezing (or one suite's text lost)
            raise BadInput(f"{named[name]} and {given} are both suite {name!r}: give each suite once")
        named[name] = given
    tok: PromptTokenizer = WordTokenizer()
    if model is not None:
        from kvgate.models import model_folder, resolve_model
        from kvgate.workload.hf_tokenizer import HFPromptTokenizer

        spec = resolve_model(model)
        tok = HFPromptTokenizer.from_folder(model_folder(spec), spec.name)
    sha = freeze_suites(list(suites), output, tok, seed=seed, limit=limit)
    click.echo(f"wrote {output} (sha256 {sha})")
    from kvgate.workload.schema import read_workload

    _show_clusters(read_workload(output).cases)


def _check_suite_names(suites: tuple[str, ...]) -> None:
    """No SUITE is empty (it named the current folder) or given twice (its cases would be frozen twice,
    refused as "duplicate case_id")."""
    from kvgate.errors import BadInput

    for i, name in enumerate(suites):
        if not name.strip():
            raise BadInput("a SUITE is empty: name a shipped suite (kvgate suites) or a suite TOML file")
        if name in suites[:i]:
            raise BadInput(f"suite {name!r} is given twice: name each suite once")


def _show_clusters(cases: Sequence[Case]) -> None:
    """The workload's cluster structure on stdout; a warning on stderr per cluster over 20% of it."""
    from kvgate.workload.clusters import cluster_structure, describe, warnings

    structure = cluster_structure(cases)
    click.echo(f"clusters: {describe(structure)}")
    for line in warnings(structure):
        click.echo(f"warning: {line}", err=True)
