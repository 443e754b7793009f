"""The `kvgate` command: a thin click group; each command lives in its own module.

Errors kvgate knows about print one line and exit with their code; nothing heavy is imported until a
command runs, so `kvgate --help` stays fast.
"""

from __future__ import annotations

import errno
import importlib
import os
from typing import Any

import click

from kvgate import __version__

COMMANDS = {
    "init": "kvgate.cli.init:init",
    "freeze": "kvgate.cli.freeze:freeze",
    "run": "kvgate.cli.run:run",
    "report": "kvgate.cli.report:report",
    "simulate": "kvgate.cli.simulate:simulate",
    "runs": "kvgate.cli.runs:runs",
    "view": "kvgate.cli.runs:view",
    "suites": "kvgate.cli.listing:suites",
    "treatments": "kvgate.cli.listing:treatments",
    "engines": "kvgate.cli.listing:engines",
    "models": "kvgate.cli.listing:models",
    "validators": "kvgate.cli.listing:validators",
}
PATH_COMMANDS = ("freeze", "run", "report", "simulate")
"""Commands that resolve paths against the current folder and store or print them."""
SUMMARIES = {
    "init": "Write a starter suite (from a JSONL trace), matrix and policy.",
    "freeze": "Freeze suites into a versioned, hashed Parquet workload.",
    "run": "Run the control and every candidate arm; store results; gate.",
    "report": "Report a run: CFR per slice, bounds, gate decision.",
    "simulate": "Simulate the gate: false-accept rate at CFR = τ, power at 2τ.",
    "runs": "List the runs under a runs directory, with their decisions.",
    "view": "Write a run's HTML report and open it (or serve it on loopback).",
    "suites": "List the shipped suites.",
    "treatments": "List the shipped treatments and matrices.",
    "engines": "List engines and server flavours: the kinds, KV dtypes and proofs each applies here.",
    "models": "List known models and whether they are available here.",
    "validators": "List the validators a case may name and what each passes.",
}


class LazyGroup(click.Group):
    """Imports a command's module only when that command is invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name].split(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, SUMMARIES[name]) for name in COMMANDS])

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a known error prints one line and exits with its code, never a traceback.
        Ctrl-C exits 130 (naming the run to resume), a closed stdout is no error, a path the system
        refuses (too long, a link loop, not a folder, read-only, …) is bad input (exit 2), and anything
        else is a bug: one line naming the file that holds the traceback, exit 70."""
        from kvgate.errors import EXIT_INTERRUPTED, KvgateError

        try:
            return super().invoke(ctx)
        except KvgateError as exc:
            message = str(exc).replace("\r", "\\r").replace("\n", "\\n")  # one line, whatever it quotes
            click.echo(f"kvgate: error: {message}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt as exc:
            click.echo(_interrupted(exc), err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except click.ClickException as exc:  # a subcommand's usage: an unknown option, a missing argument, …
            usage_error(ctx, exc)
        except (click.exceptions.Exit, click.Abort):
            raise
        except OSError as exc:
            if exc.errno not in PATH_ERRNOS or exc.filename is None:
                raise_internal(ctx, exc)
            click.echo(f"kvgate: error: {_path_error(exc)}", err=True)
            ctx.exit(2)
        except Exception as exc:
            raise_internal(ctx, exc)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """No argument may hold a NUL byte (no path or name can) or bytes that are not UTF-8 (kvgate stores
        paths as UTF-8 text), nor may a command that resolves paths run from a folder whose path is not
        UTF-8: one line, exit 2."""
        bad = next((a for a in args if "\x00" in a), None)
        if bad is not None:
            click.echo(f"kvgate: error: argument {bad[:60]!r} holds a NUL byte", err=True)
            ctx.exit(2)
        undecodable = next((a for a in args if not _utf8(a)), None)
        if undecodable is not None:  # kvgate stores paths and names as UTF-8 text
            shown = ascii(undecodable[:60])
            click.echo(
                f"kvgate: error: argument {shown} holds bytes that are not UTF-8; rename the file or "
                "folder it names to a UTF-8 name",
                err=True,
            )
            ctx.exit(2)
        if args and args[0] in PATH_COMMANDS and not _utf8(_cwd()):
            click.echo(
                f"kvgate: error: the current folder {_cwd()!a} holds bytes that are not UTF-8; run "
                "kvgate from a folder whose path is UTF-8",
                err=True,
            )
            ctx.exit(2)
        try:
            return super().parse_args(ctx, args)
        except click.ClickException as exc:  # the group's own usage (`kvgate --bogus`)
            usage_error(ctx, exc)
            raise  # not reached: usage_error exits

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            from kvgate.registry import unknown_name

            raise click.UsageError(str(unknown_name("command", name, list(COMMANDS))))
        return super().resolve_command(ctx, args)


PATH_ERRNOS = frozenset(
    {errno.ENAMETOOLONG, errno.ELOOP, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENOENT,
     errno.EACCES, errno.EPERM, errno.EROFS, errno.ENXIO, errno.ENODEV, errno.EMLINK, errno.ETXTBSY}
)  # fmt: skip
"""What a path the user named can make the operating system refuse: bad input, never a bug."""


def _path_error(exc: OSError) -> str:
    """One line for a path the system refused: the path (shortened) and the reason."""
    name = os.fsdecode(exc.filename)
    shown = repr(name) if len(name) <= 160 else f"{name[:80]!r}…{name[-60:]!r} ({len(name)} characters)"
    return f"cannot use {shown}: {exc.strerror or exc}; name another path"


def usage_error(ctx: click.Context, exc: click.ClickException) -> None:
    """A usage error (an unknown option, a missing argument, a value outside a choice or range) as every
    other bad input: "kvgate: error: …" in one line with the command's help to see, exit 2. Running the
    bare group still prints its help."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        raise exc
    click.echo(f"kvgate: error: {usage_line(exc, ctx)}", err=True)
    ctx.exit(exc.exit_code)


def usage_line(exc: click.ClickException, ctx: click.Context) -> str:
    """Click's message in one line, lower-cased as kvgate's own, with the help of the command it is about
    (`see 'kvgate run --help'`; the subcommand being parsed when click's error names no context)."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    message = message[:1].lower() + message[1:]
    if not isinstance(exc, click.UsageError):
        return message
    if exc.ctx is not None:
        command = exc.ctx.command_path
    else:
        command = " ".join(filter(None, (ctx.command_path, ctx.invoked_subcommand)))
    return f"{message} (see '{command} --help')"


def raise_internal(ctx: click.Context, exc: BaseException) -> None:
    """A bug: one line naming the file with the traceback, exit 70 (a closed stdout is exit 0)."""
    from kvgate.cli.closed_stdout import silence_stdout, stdout_closed
    from kvgate.cli.crash import crash_message
    from kvgate.errors import EXIT_INTERNAL

    if isinstance(exc, BrokenPipeError) and stdout_closed():
        silence_stdout()
        ctx.exit(0)
    click.echo(crash_message(exc), err=True)
    ctx.exit(EXIT_INTERNAL)


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # removed while we stand in it: the command says so when it resolves a path
        return ""


def _utf8(text: str) -> bool:
    """Whether `text` is valid UTF-8 (an argument holding other bytes arrives with surrogate escapes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _interrupted(exc: KeyboardInterrupt) -> str:
    run_dir = getattr(exc, "run_dir", None)
    if run_dir is None:
        return "kvgate: interrupted"
    return f"kvgate: interrupted; the rows stored in {run_dir} are kept: continue with --resume {run_dir}"


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="kvgate")
def cli() -> None:
    """kvgate: may this KV-cache optimisation roll out? A paired gate against the full cache.

    Exit codes: 0 pass, 1 gate failed, 2 bad input, 3 inconclusive, 4 engine error, 70 internal error (a
    bug in kvgate; one line names the file holding the traceback), 130 interrupted (Ctrl-C).
    """


def main() -> None:
    """Console entry point: the process ends with its command (cli.one_shot.PROCESS tells the command)."""
    from kvgate.cli.one_shot import PROCESS

    cli(obj=PROCESS)
