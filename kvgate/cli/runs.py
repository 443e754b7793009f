"""`kvgate runs [DIR]`: the runs under a runs directory; `kvgate view RUN`: its HTML report, opened.

`view` writes the report to `RUN/report.html` (or `-o FILE`) and opens it in the browser; `--serve`
serves that file on loopback only (127.0.0.1) until Ctrl-C, for a machine reached over SSH with a
forwarded port.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import click

from kvgate.cli.options import PATH, was_given


@click.command()
@click.argument("runs_dir", type=PATH, default=None, required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON array of runs on stdout.")
def runs(runs_dir: Path, as_json: bool) -> None:
    """List the runs under RUNS_DIR (default: $KVGATE_RUNS, else runs): id, created, matrix, engine,
    model, decision."""
    from kvgate.cli.run import env_default
    from kvgate.errors import BadInput
    from kvgate.report.analysis.runs_index import list_runs

    runs_dir = runs_dir or Path(env_default("KVGATE_RUNS") or "runs")
    try:
        os.lstat(runs_dir)
    except FileNotFoundError:  # was: "runs is not a folder of runs", before any run was made
        raise BadInput(
            f"{runs_dir} does not exist, so it holds no runs: `kvgate run` makes them there (or in -o DIR); "
            "name the folder your runs are in"
        ) from None
    if not runs_dir.is_dir():
        raise BadInput(f"{runs_dir} is not a folder of runs (kvgate run -o DIR makes one)")
    from kvgate.cli.output_path import run_around

    if run_around(runs_dir) == runs_dir:  # it listed "no runs in RUN"
        raise BadInput(
            f"{runs_dir} is a run, not a folder of runs: `kvgate report {runs_dir}` reports it, "
            f"`kvgate runs {runs_dir.parent}` lists it with the others"
        )
    rows = list_runs(runs_dir)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"no runs in {runs_dir}")
        return
    table = [["run", "created (UTC)", "matrix", "engine", "model", "cases", "decision"]]
    for r in rows:
        decision = r["decision"] if r["exit_code"] is None else f"{r['decision']} (exit {r['exit_code']})"
        created = (r["created_at"] or "")[:19].replace("T", " ")
        cells = [
            r["run_id"] or Path(r["path"]).name,
            created,
            r["matrix"],
            r["engine"],
            r["model"],
            r["n_cases"],
        ]
        table.append([*(str(c) if c is not None else "—" for c in cells), decision])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:  # whole values, never cut: a run id is what the next command takes
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


@click.command()
@click.argument("run_dir", type=PATH)
@click.option("-o", "--output", type=PATH, default=None, help="[default: RUN/report.html]")
@click.option(
    "--serve", is_flag=True, help="Serve the report on 127.0.0.1 until Ctrl-C instead of opening it."
)
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="Port for --serve (0: any free one).")
@click.option("--no-open", is_flag=True, help="Only write the file and print its path.")
@click.pass_context
def view(
    ctx: click.Context, run_dir: Path, output: Path | None, serve: bool, port: int, no_open: bool
) -> None:
    """Write RUN_DIR's HTML report and open it in the browser (or serve it on loopback)."""
    from kvgate.cli.output_path import check_output_file
    from kvgate.cli.report import write_output
    from kvgate.errors import BadInput
    from kvgate.report.analysis.build import build_report
    from kvgate.report.render.formats import render

    if was_given(ctx, "port") and not serve:  # else ignored: the report was opened, or only written
        raise BadInput("--port applies only with --serve: add it, or leave --port out")
    path = output or run_dir / "report.html"
    check_output_file(path, "the HTML report")

    def write() -> None:
        write_output(path, render(build_report(run_dir), "html"))
        click.echo(f"kvgate: wrote {path}", err=True)

    if serve:
        _serve(path, port, write)
        return
    write()
    if not no_open:
        import webbrowser

        if not webbrowser.open(path.resolve().as_uri()):
            click.echo(f"kvgate: no browser here: open {path}, or serve it with --serve", err=True)


def _serve(path: Path, port: int, write: Callable[[], None]) -> None:
    """Bind 127.0.0.1:PORT, then `write()` the report to `path` and serve it alone at
    http://127.0.0.1:PORT/ (every other request is a 404) until Ctrl-C. The port is bound first: a taken
    one was found only after the report was rendered and written."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = b""  # the page, read once it is written

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path not in ("/", f"/{path.name}"):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:  # the port is taken, or privileged
        from kvgate.errors import BadInput

        raise BadInput(
            f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}; give another --port (0: any free one)"
        ) from None
    with server, contextlib.suppress(KeyboardInterrupt):  # closed however the writing or serving ends
        write()
        body = path.read_bytes()
        click.echo(f"kvgate: serving http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C to stop)", err=True)
        server.serve_forever()
