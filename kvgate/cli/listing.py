"""`kvgate suites | treatments | engines | models`: what is available here."""

from __future__ import annotations

import click


def _table(title: str, headers: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for header in headers:
        table.add_column(header)
    for row in rows:
        table.add_row(*row)
    Console().print(table)


@click.command()
def suites() -> None:
    """List the shipped suites: case count, tasks, slice columns and what each is for."""
    from kvgate.workload.suite_summary import cases_label, summarize
    from kvgate.workload.suites import parse_suite, shipped_suites

    rows = []
    for name, path in shipped_suites().items():
        spec = parse_suite(path)
        summary = summarize(spec)
        tasks = ", ".join(summary.tasks) or "from the data"
        columns = ", ".join(summary.slice_columns) or "from the data"
        rows.append([name, cases_label(summary), tasks, columns, spec.description])
    _table("suites", ["name", "cases", "tasks", "slice columns", "description"], rows)


@click.command()
def treatments() -> None:
    """List the treatment kinds with their methods, parameters and defaults; the catalog; the matrices."""
    from kvgate.cli.treatment_kinds import kind_rows, relevant
    from kvgate.treatments.matrix import catalog_tables, parse_treatment, resolve_matrix, shipped_matrices

    _table("treatment kinds", ["kind", "method", "parameters (defaults)", "what it does"], kind_rows())
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
    _table("treatments", ["name", "kind", "settings"], rows)
    mrows = []
    for name in shipped_matrices():
        m = resolve_matrix(name)
        mrows.append(
            [name, m.control.name, ", ".join(c.name for c in m.candidates), "yes" if m.aa_replicate else "no"]
        )
    _table("matrices", ["name", "control", "candidates", "A/A"], mrows)


@click.command()
def engines() -> None:
    """List engines, whether they are installed here, and the treatment kinds each applies."""
    from kvgate.engines.registry import ENGINES

    rows = []
    for info in ENGINES.values():
        missing = info.missing()
        status = "ready" if not missing else f"missing {', '.join(missing)} — {info.install_hint}"
        rows.append([info.name, status, ", ".join(info.kinds), info.description])
    _table("engines", ["name", "status", "treatment kinds", "description"], rows)


@click.command()
def models() -> None:
    """List known models and whether they are available here."""
    from kvgate.models import MODELS

    rows = [
        [m.name, "available" if m.available() else "not installed", m.description] for m in MODELS.values()
    ]
    _table("models (or name a local Hugging Face folder)", ["name", "status", "description"], rows)
