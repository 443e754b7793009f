"""`kvgate init TRACE.jsonl`: a starter gate in a folder of its own, to edit and then freeze and run.

It writes, and never overwrites, `DIR/suite.toml` (a `[[trace]]` of the given file, its path relative
to DIR), `DIR/matrix.toml` (the full-cache control and the default matrix's candidates the chosen engine
can run, from the engine table) and `DIR/policy.toml` (the shipped default policy, headed by the trace's
tasks as slices `critical` may name), then prints the freeze and run commands for them. Records without
an `expected` answer cannot be judged: the suite drops them (`skip_unlabelled = true`, said), and a trace
with none is refused.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import click

from kvgate.cli.options import MODEL_TAKES, PATH

FILES = ("suite.toml", "matrix.toml", "policy.toml")


def _trace_tasks(trace: Path) -> tuple[int, int, list[str]]:
    """(records, those without an expected answer, their distinct tasks) of a trace, read and checked as
    `freeze` reads it (one reader: `workload.traces`); BadInput naming the first bad line, or saying that
    no record has an answer to judge."""
    from kvgate.errors import BadInput
    from kvgate.workload.traces import normalise_messages, read_records

    records = read_records(trace)
    for where, _, record in records:
        if "messages" not in record:
            raise BadInput(f"{where}: a record needs `messages` (OpenAI chat format)")
        try:
            normalise_messages(record["messages"], record.get("tools"))
        except ValueError as exc:
            raise BadInput(f"{where}: {exc}") from None
    if not records:
        raise BadInput(f"trace {trace} holds no records")
    unlabelled = sum(1 for _, _, record in records if not _labelled(record))
    if unlabelled == len(records):
        raise BadInput(
            f"trace {trace}: none of its {len(records)} records has an 'expected' answer, so no case could "
            "be judged: add `expected` (or `expected_json`) to the records you gate on"
        )
    return len(records), unlabelled, sorted({str(record.get("task", "trace")) for _, _, record in records})


def _labelled(record: dict[str, object]) -> bool:
    """Whether trace import finds the record's answer (`workload.traces`: expected, else expected_json)."""
    return record.get("expected") is not None or isinstance(record.get("expected_json"), str)


@click.command()
@click.argument("trace", type=PATH)
@click.option("-o", "--dir", "folder", type=PATH, default=Path("gate"), show_default=True)
@click.option(
    "--engine", default="hf", show_default=True, help="The engine the matrix is for (kvgate engines)."
)
@click.option(
    "--model", default="smollm2-135m", show_default=True, help=f"For the printed commands: {MODEL_TAKES}."
)
def init(trace: Path, folder: Path, engine: str, model: str) -> None:
    """Write a starter suite (from TRACE, a JSONL of recorded chat requests), matrix and policy."""
    from kvgate import shipped
    from kvgate.engines.capability import missing_kinds
    from kvgate.engines.registry import engine_info
    from kvgate.errors import BadInput
    from kvgate.models import resolve_model
    from kvgate.treatments.matrix import DEFAULT_MATRIX, resolve_matrix

    engine_info(engine)
    resolve_model(model)  # a typo is refused here, not printed into the commands to run
    records, unlabelled, tasks = _trace_tasks(trace)
    taken = [name for name in FILES if os.path.lexists(folder / name)]  # a dangling link is taken too
    if taken:
        raise BadInput(f"{folder} already holds {', '.join(taken)}: edit them, or give another -o DIR")
    default = resolve_matrix(DEFAULT_MATRIX)
    candidates = [c.name for c in default.candidates if not missing_kinds(engine, c)]
    if not candidates:
        raise BadInput(f"engine {engine!r} runs none of the default matrix's candidates; pick another engine")
    relative = Path(os.path.relpath(trace.resolve(), folder.resolve()))
    folder.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9._+-]", "-", trace.stem).lstrip("._+-")[:64] or "trace"
    (folder / "suite.toml").write_text(
        f'# {records} recorded requests; docs/reference.md, "Suite TOML", lists what [[trace]] takes.\n'
        f'name = "{name}"\ndescription = "Requests recorded in {trace.name}"\n\n'
        f"[[trace]]\npath = {json.dumps(str(relative))}\n"
        'validator = "substring_any"   # for records that name none (kvgate validators lists them)\n'
        + (
            f"skip_unlabelled = true   # {unlabelled} of the {records} records have no 'expected' answer: "
            "freeze drops them\n"
            if unlabelled
            else ""
        ),
        encoding="utf-8",
    )
    (folder / "matrix.toml").write_text(
        f"# The full-cache control and the candidates engine {engine!r} can run (kvgate treatments lists\n"
        "# every treatment; a [treatment.<name>] table here defines your own).\n"
        f'[matrix]\ncontrol = "full"\ncandidates = {json.dumps(candidates)}\naa_replicate = true\n',
        encoding="utf-8",
    )
    hint = ", ".join(f'"task={t}"' for t in tasks)
    policy = (shipped.treatments_dir() / "policy.toml").read_text(encoding="utf-8")
    (folder / "policy.toml").write_text(
        f"# The trace's tasks, which `critical` may name to gate each one beside `all`: [{hint}]\n" + policy,
        encoding="utf-8",
    )
    workload = folder / "workload.parquet"
    tokens = "" if engine == "fake" else f" --model {model}"
    click.echo(f"wrote {', '.join(str(folder / name) for name in FILES)}")
    if unlabelled:
        click.echo(
            f"note: {unlabelled} of the {records} records have no 'expected' answer; freeze drops them"
        )
    click.echo(f"next: kvgate freeze {folder / 'suite.toml'}{tokens} -o {workload}")
    click.echo(
        f"      kvgate run --engine {engine}{tokens} -w {workload} -m {folder / 'matrix.toml'} "
        f"--policy {folder / 'policy.toml'}"
    )
