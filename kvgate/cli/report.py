"""`kvgate report RUN_DIR`: the gate over stored results, in the format asked for."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kvgate.cli.options import PATH, was_given
from kvgate.report.render.formats import FORMATS

if TYPE_CHECKING:
    from kvgate.report.document.report import Report


def parse_formats(text: str, output: Path | None) -> list[str]:
    """`md` or `md,junit,json`, case aside (`JSON` is json); several need `-o DIR`. Unknown names are
    refused with "did you mean"."""
    from kvgate.errors import BadInput
    from kvgate.registry import unknown_name

    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name.lower() not in FORMATS:  # was: `JSON` unknown, with no suggestion
            raise unknown_name(FORMATS.kind, name, FORMATS.names())
    names = [name.lower() for name in names]
    if not names:
        raise BadInput(f"--format is empty: name one or more of {', '.join(FORMATS)}")
    if len(names) > 1 and output is None:
        raise BadInput("several formats need -o DIR, the folder to write report.md, junit.xml, … into")
    return list(dict.fromkeys(names))


def _needs(given: object, option: str, **flags: bool) -> None:
    """Each of `flags` that is set needs `option` (given unless None): refused rather than ignored."""
    from kvgate.errors import BadInput

    for name, value in flags.items():
        if value and given is None:
            flag = "--" + name.replace("_", "-")
            raise BadInput(f"{flag} applies only with {option}: add it, or leave {flag} out")


def _same_folder(a: Path, b: Path) -> bool:
    """Whether `a` and `b` name one existing folder."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # either is missing or unreadable: said when it is read
        return False


def _refuse_a_suffix_of_another_format(output: Path) -> None:
    """`-o report.json` without --format wrote the table into report.json: a file whose suffix is another
    format's (.md, .html, .json, .xml) is refused without --format, naming the format to add."""
    from kvgate.errors import BadInput

    by_suffix = {Path(FORMATS[name].file_name).suffix: name for name in FORMATS}
    meant = by_suffix.get(output.suffix.lower())
    if meant is not None and meant != "table":
        raise BadInput(
            f"-o {output} would hold the table (the default --format): add --format {meant}, or --format "
            "table to write the table there"
        )


def check_outputs(formats: list[str], output: Path | None, samples: Path | None) -> None:
    """Every file the report command is to write can be written and holds no input (`output_path`),
    checked before the run is read: one format to the file `output`, several into the folder `output`."""
    from kvgate.cli.output_path import check_output_file, check_output_folder
    from kvgate.errors import BadInput

    if output is not None and len(formats) > 1:
        if os.path.lexists(output) and not output.is_dir():
            raise BadInput(f"-o {output} is a file: several formats are written into a folder; name a folder")
        check_output_folder(output, "the reports")
        for name in formats:
            check_output_file(output / FORMATS[name].file_name, f"the {name} report")
    elif output is not None:
        check_output_file(output, "the report")
    if samples is not None:
        check_output_file(samples, "the samples")


def emit(report: Report, fmt: str, output: Path | None, junit_inconclusive: str = "failure") -> None:
    """Render `report` as `fmt` to `output` (stdout when None); a table fits the terminal's width (when
    not a terminal: COLUMNS, else 120 columns, each line without trailing spaces). A closed stdout drops
    the rest of the report. With KVGATE_CHECK_REPORT=1 the report is first checked against its schema
    (report.schema)."""
    from kvgate.cli.closed_stdout import stdout_console, tolerating_closed_stdout
    from kvgate.report.schema import check_report, checking

    if checking():
        check_report(report)
    if fmt == "table" and output is None and sys.stdout.isatty():
        from kvgate.report.render.table import render_terminal

        with tolerating_closed_stdout():
            render_terminal(report, stdout_console(None))
        return
    from kvgate.report.render.formats import render

    text = render(report, fmt, width=piped_width(), junit_inconclusive=junit_inconclusive)
    if output is None:
        with tolerating_closed_stdout():
            click.echo(text, nl=False)
        return
    write_output(output, text)


PIPED_WIDTH = 120
"""Columns of a table written to a file or a pipe when COLUMNS does not say."""


def piped_width() -> int:
    """COLUMNS when it is a width (20 to 1000 columns), else PIPED_WIDTH."""
    value = os.environ.get("COLUMNS", "")
    return int(value) if value.isdigit() and 20 <= int(value) <= 1000 else PIPED_WIDTH


def write_output(output: Path, text: str) -> None:
    """Write a rendered report whole or not at all (temp file, fsync, rename): a full disk or a crash
    leaves the previous file as it was. A device or a named pipe (`-o /dev/null`, `-o /dev/stdout`, a
    FIFO) is written into, never renamed over: that would put a plain file where the device was."""
    import stat

    from kvgate.errors import BadInput
    from kvgate.workload.schema import atomic_write

    data = text.encode("utf-8")
    try:
        mode = os.stat(output).st_mode if os.path.lexists(output) else None
        if mode is not None and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
            _write_into(output, data)
        elif mode is not None and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise BadInput(f"cannot write {output}: not a regular file, device or pipe; name a file")
        else:
            atomic_write(output, lambda f: f.write(data))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise BadInput(
                f"cannot write {output}: a pipe nothing reads from; start its reader first"
            ) from None
        raise BadInput(f"cannot write {output}: {exc.strerror or exc}") from None


def _write_into(output: Path, data: bytes) -> None:
    """Write into an existing device or pipe; opened without blocking, so a pipe with no reader is ENXIO
    (an error), not a hang."""
    fd = os.open(output, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


@click.command()
@click.argument("run_dir", type=PATH)
@click.option(
    "--format", "fmt", default="table", show_default=True,
    help=f"{' | '.join(FORMATS)}, or several comma-separated (md,junit,json) with -o DIR.",
)  # fmt: skip
@click.option(
    "-o", "--output", type=PATH, default=None,
    help="Write to this file (several formats: into this folder, as report.md, junit.xml, report.json, …).",
)  # fmt: skip
@click.option("--policy", type=PATH, default=None, help="Gate on another policy.")
@click.option("--policy-changed-reason", default=None, help="Why the policy differs from the declared one.")
@click.option("--policy-unsafe-reason", default=None, help="Why a --policy below the safety floor is used.")
@click.option(
    "--compare",
    type=PATH,
    default=None,
    help="Baseline run: CFR deltas, decision changes; regressions listed first.",
)
@click.option(
    "--fail-on-regression", is_flag=True,
    help="With --compare: exit 1 when a slice regressed (decision worse, or a gated CFR rose significantly).",
)  # fmt: skip
@click.option(
    "--allow-different", is_flag=True,
    help="With --compare: compare runs of different workloads, models or engines.",
)  # fmt: skip
@click.option(
    "--junit-inconclusive",
    type=click.Choice(["failure", "skip"]),
    default="failure",
    show_default=True,
    help="JUnit: an inconclusive arm or gated slice is a failure, or skipped.",
)
@click.option(
    "--samples", type=PATH, default=None,
    help="Also write one JSON line per (candidate, case) pair to this file: ids, slices, answers, verdicts.",
)  # fmt: skip
@click.pass_context
def report(
    ctx: click.Context,
    run_dir: Path,
    fmt: str,
    output: Path | None,
    policy: Path | None,
    policy_changed_reason: str | None,
    policy_unsafe_reason: str | None,
    compare: Path | None,
    fail_on_regression: bool,
    allow_different: bool,
    junit_inconclusive: str,
    samples: Path | None,
) -> None:
    """Report RUN_DIR: cache-induced failure rate per slice with its bound, against τ.

    The exit code is the gate's: 0 pass, 1 fail, 2 bad input, 3 inconclusive, 4 engine error
    (70 internal error, 130 interrupted); as for `kvgate run`, isolation the counters contradict is 4
    and a lossless arm that diverged under load fails the gate.
    """
    from kvgate.cli.one_shot import PROCESS, reuse_freed_memory, single_blas_thread, without_cycle_collection

    single_blas_thread()  # first: before anything imports numpy (or pyarrow)
    if ctx.obj is PROCESS:
        reuse_freed_memory()
    ctx.with_resource(without_cycle_collection(last_act=ctx.obj is PROCESS))
    from kvgate.cli.findings import exit_code_with_findings
    from kvgate.errors import EXIT_ENGINE_ERROR, EXIT_GATE_FAILED, BadInput
    from kvgate.gate.policy import read_policy_text
    from kvgate.report.analysis.build import PolicyChange, build_report, verified_report

    formats = parse_formats(fmt, output)
    _needs(
        compare,
        "--compare BASELINE_RUN",
        fail_on_regression=fail_on_regression,
        allow_different=allow_different,
    )
    _needs(
        policy, "--policy FILE", policy_changed_reason=policy_changed_reason is not None,
        policy_unsafe_reason=policy_unsafe_reason is not None,
    )  # fmt: skip
    junit = "junit" if "junit" in formats else None
    _needs(junit, "--format junit", junit_inconclusive=was_given(ctx, "junit_inconclusive"))
    if compare is not None and _same_folder(run_dir, compare):  # else every delta was 0, "no regression"
        raise BadInput(f"--compare {compare} is the run reported: compare with another run (a baseline)")
    check_outputs(formats, output, samples)
    if output is not None and not was_given(ctx, "fmt"):
        _refuse_a_suffix_of_another_format(output)
    policy_text = read_policy_text(policy) if policy is not None else None
    change = PolicyChange(policy_text, policy_changed_reason, policy_unsafe_reason, source=str(policy))
    data, rows = verified_report(run_dir, change)
    if data.policy.changed_reason and formats != ["table"]:
        click.echo(f"kvgate: policy changed after the run: {data.policy.changed_reason}", err=True)
    if compare is not None:
        from kvgate.report.analysis.compare import compare_reports

        baseline = build_report(compare, change)  # without --policy the reason is not read
        data = data.model_copy(update={"compare": compare_reports(data, baseline, allow_different)})
    if len(formats) == 1:
        emit(data, formats[0], output, junit_inconclusive)
    else:
        assert output is not None  # parse_formats asks for -o with several
        for name in formats:
            emit(data, name, output / FORMATS[name].file_name, junit_inconclusive)
        click.echo(
            f"kvgate: wrote {', '.join(FORMATS[n].file_name for n in formats)} into {output}", err=True
        )
    if samples is not None:
        from kvgate.report.analysis.run_data import read_cases
        from kvgate.report.analysis.samples import samples_jsonl
        from kvgate.rundir.manifest import read_manifest

        manifest = read_manifest(run_dir)
        write_output(samples, samples_jsonl(manifest, read_cases(manifest), rows))
        click.echo(f"kvgate: wrote {samples} (one line per candidate and case)", err=True)
    code = exit_code_with_findings(run_dir, data, quiet=False, counters=rows.counters())
    if fail_on_regression and data.compare and data.compare.regressions and code != EXIT_ENGINE_ERROR:
        ctx.exit(EXIT_GATE_FAILED)
    ctx.exit(code)
