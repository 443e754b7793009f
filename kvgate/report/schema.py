"""The report JSON's schema (`kvgate/data/reports/report.schema.json`, JSON Schema 2020-12) and its check.

The schema is the contract of what `kvgate report --format json` and `kvgate run --json` print: every
field, its type, its bounds and the decisions it may take. `docs/reference.md` describes the fields.
Checking is slow beside building a report (on a million result rows with 10,100 failing examples it
costs about four fifths of the report's own CPU time), so kvgate does not check by default; with
`KVGATE_CHECK_REPORT=1` in the environment every report is checked before it is rendered (the test suite
runs so), and one that does not fit is an internal error (exit 70).
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

import jsonschema

from kvgate import shipped

SCHEMA_FILE = "report.schema.json"
CHECK_ENV = "KVGATE_CHECK_REPORT"


class ReportShapeError(RuntimeError):
    """A report that does not fit its schema: a bug in kvgate, never the user's input."""


@cache
def report_schema() -> dict[str, Any]:
    """The shipped schema, read once."""
    schema: dict[str, Any] = json.loads((shipped.reports_dir() / SCHEMA_FILE).read_text(encoding="utf-8"))
    return schema


@cache
def _validator() -> jsonschema.protocols.Validator:
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _said(error: jsonschema.ValidationError) -> str:
    """One error in a few words: a value that fits none of a choice of forms is not quoted whole."""
    where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
    if error.validator in ("oneOf", "anyOf"):
        what = error.schema.get("description") if isinstance(error.schema, dict) else None
        return f"{where}: fits none of the allowed forms" + (f" ({what.rstrip('.')})" if what else "")
    return f"{where}: {error.message[:200]}"


def report_errors(report: Any, limit: int = 5) -> list[str]:
    """Where `report` (parsed JSON) breaks the schema, as `path: message` lines (empty when it fits)."""
    errors = sorted(_validator().iter_errors(report), key=lambda e: list(map(str, e.absolute_path)))
    return [_said(error) for error in errors[:limit]]


def checking() -> bool:
    """Whether reports are checked before they are rendered (`KVGATE_CHECK_REPORT=1`)."""
    return os.environ.get(CHECK_ENV, "") == "1"


def check_report(report: dict[str, Any]) -> None:
    """ReportShapeError naming the first fields where the report's JSON breaks the schema. The report is
    checked as JSON text would be read back (tuples become lists), not as the objects that built it."""
    from kvgate.report.renderers import render_json

    errors = report_errors(json.loads(render_json(report)))
    if errors:
        raise ReportShapeError("the report does not fit its schema: " + "; ".join(errors))
