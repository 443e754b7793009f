"""`kvgate suites | treatments | engines | models | validators`: what is available here, as tables or,
with `--json`, as JSON on stdout (one array of objects keyed by the table's headers; `treatments`, which
shows three tables, an object of three such arrays)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

Table = tuple[str, list[str], list[list[str]]]
"""(title, headers, rows) of one listing table."""
F = TypeVar("F", bound=Callable[..., Any])


def json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout instead of a table.")(
        command
    )


def _emit(tables: list[Table], as_json: bool) -> None:
    if as_json:
        objects = {
            title: [dict(zip(headers, row, strict=True)) for row in rows] for title, headers, rows in tables
        }
        click.echo(json.dumps(next(iter(objects.values())) if len(objects) == 1 else objects, indent=2))
        return
    from rich.console import Console
    from rich.table import Table as RichTable

    from kvgate.cli.report import piped_width

    # Cells are plain text (`of = [two or more …]` is no markup), folded rather than cut when narrow, and
    # a pipe or a file gets the report's width (COLUMNS, else 120), not rich's 80.
    console = Console(markup=False, highlight=False, width=None if sys.stdout.isatty() else piped_width())
    for title, headers, rows in tables:
        table = RichTable(title=title, title_justify="left")
        for header in headers:
            table.add_column(header, overflow="fold")
        for row in rows:
            table.add_row(*row)
        console.print(table)


def headline(text: str) -> str:
    """A description's opening phrase: up to its first sentence end, colon or parenthesis."""
    cuts = [i for i in (text.find(mark) for mark in (". ", ": ", " (", "; ")) if i > 0]
    return text[: min(cuts)] if cuts else text.rstrip(".")


@click.command()
@click.option("-v", "--verbose", is_flag=True, help="Full descriptions (else each one's opening phrase).")
@json_option
def suites(verbose: bool, as_json: bool) -> None:
    """List the shipped suites: case count, tasks, slice columns and what each is for."""
    from kvgate.workload.suite_summary import cases_label, summarize
    from kvgate.workload.suites import parse_suite, shipped_suites

    rows = []
    for name, path in shipped_suites().items():
        spec = parse_suite(path)
        summary = summarize(spec)
        tasks = ", ".join(summary.tasks) or "from the data"
        columns = ", ".join(summary.slice_columns) or "from the data"
        description = spec.description if verbose or as_json else headline(spec.description)
        rows.append([name, cases_label(summary), tasks, columns, description])
    _emit([("suites", ["name", "cases", "tasks", "slice columns", "description"], rows)], as_json)


@click.command()
@json_option
def treatments(as_json: bool) -> None:
    """List the treatment kinds with their methods, parameters and defaults; the catalog; the matrices."""
    from kvgate.cli.treatment_kinds import kind_rows, relevant
    from kvgate.treatments.matrix import catalog_tables, parse_treatment, resolve_matrix, shipped_matrices

    kinds: Table = (
        "treatment kinds",
        ["kind", "method", "parameters (defaults)", "what it does"],
        kind_rows(),
    )
    tables = catalog_tables()
    rows = []
    for name in tables:
        t = parse_treatment(name, tables, "catalog")
        detail = ", ".join(
            f"{k}={v}"
            for k, v in relevant(t.to_dict()).items()
            if k not in ("kind", "name", "engine_args", "of")
        )
        if t.kind == "composite":
            detail = " + ".join(p.name for p in t.parts())
        rows.append([name, t.kind, detail])
    mrows = []
    for name in shipped_matrices():
        m = resolve_matrix(name)
        mrows.append(
            [name, m.control.name, ", ".join(c.name for c in m.candidates), "yes" if m.aa_replicate else "no"]
        )
    listed: Table = ("treatments", ["name", "kind", "settings"], rows)
    _emit([kinds, listed, ("matrices", ["name", "control", "candidates", "A/A"], mrows)], as_json)


@click.command()
@json_option
def engines(as_json: bool) -> None:
    """List engines, whether they are installed here, the treatment kinds and KV dtypes each applies,
    and what each server flavour applies and proves its treatments with."""
    from kvgate.engines.registry import ENGINES
    from kvgate.engines.server.flavours.registry import FLAVOURS

    rows = []
    for name, info in ENGINES.items():
        missing = info.missing()
        status = "ready" if not missing else f"missing {', '.join(missing)} — {info.install_hint}"
        dtypes, on_cpu = info.stored_kv_dtypes(), info.stored_kv_dtypes(on_cpu=True)
        stored = ", ".join(dtypes) + (f" (on CPU: {', '.join(on_cpu)})" if on_cpu != dtypes else "")
        reuse = ", ".join(info.reuse_modes) if "reuse" in info.kinds else "none"
        offload = ", ".join(info.offload_tiers) if "offload" in info.kinds else "none"
        proof = "; ".join(f"{kind}: {counters}" for kind, counters in info.proof)
        rows.append([name, status, ", ".join(info.kinds), stored, reuse, offload, proof, info.description])
    headers = ["name", "status", "treatment kinds", "kv dtypes", "reuse", "offload", "proof counters"]
    headers.append("description")
    columns = ["treatment kinds", "kv dtypes", "reuse", "offload", "kv_blocks", "proof counters"]
    flavours = [[name, *(f.applies.listing()[c] for c in columns)] for name, f in FLAVOURS.items()]
    _emit(
        [("engines", headers, rows), ("server flavours (-E flavour=NAME)", ["flavour", *columns], flavours)],
        as_json,
    )


@click.command()
@json_option
def models(as_json: bool) -> None:
    """List known models and whether they are available here."""
    from kvgate.models import MODELS

    rows = [
        [m.name, "available" if m.available() else "not installed", m.description] for m in MODELS.values()
    ]
    _emit(
        [("models (or name a local Hugging Face folder)", ["name", "status", "description"], rows)], as_json
    )


@click.command()
@json_option
def validators(as_json: bool) -> None:
    """List the validators a suite's cases may name, and what each passes."""
    from kvgate.validators.registry import get_validator, validator_names

    rows = []
    for name in validator_names():
        doc = (type(get_validator(name)).__doc__ or "").strip().splitlines()
        rows.append([name, doc[0] if doc else ""])
    _emit([("validators", ["name", "description"], rows)], as_json)
