"""The report JSON's schema (`reports/templates/report.schema.json`, JSON Schema 2020-12) and its check.

The schema is the contract of what `kvgate report --format json` and `kvgate run --json` print: every
field, its type, its bounds and the decisions it may take; it is generated from the report's models
(report.document), which check every report as it is built (58 ms of CPU for a report with 10,100
failing examples). Checking the printed JSON against the schema as well is slower (on a million result
rows about half the report's own CPU time), so kvgate does it only with `KVGATE_CHECK_REPORT=1` in the
environment (the test suite runs so); a report that does not fit either is an internal error (exit 70).
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import TYPE_CHECKING, Any

import jsonschema
from pydantic import ValidationError

from kvgate import shipped

if TYPE_CHECKING:
    from kvgate.report.document.report import Report

SCHEMA_FILE = "report.schema.json"
CHECK_ENV = "KVGATE_CHECK_REPORT"


class ReportShapeError(RuntimeError):
    """A report that does not fit its schema: a bug in kvgate, never the user's input."""


@cache
def report_schema() -> dict[str, Any]:
    """The shipped schema, read once."""
    schema: dict[str, Any] = json.loads((shipped.reports_dir() / SCHEMA_FILE).read_text(encoding="utf-8"))
    return schema


DEFS = "#/$defs/"
PLAIN_KEYS = {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "pattern", "minLength"}
"""Keywords of a typed value that a null passes anyway (they constrain only values of their type)."""


def inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with each `$ref` to one of its `$defs` replaced by the definition (a recursive one stays a
    reference), and "a plain typed value or null" written as one type list: the same verdicts, checked
    in less than half the time (jsonschema spends most of it following references and alternatives)."""
    defs = schema.get("$defs", {})

    def expand(node: Any, within: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [expand(item, within) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if len(node) == 1 and isinstance(ref, str) and ref.startswith(DEFS):
            name = ref[len(DEFS) :]
            return node if name in within else expand(defs[name], within | {name})
        out = {k: v if k in ("enum", "const") else expand(v, within) for k, v in node.items() if k != "$defs"}
        return _nullable(out)

    flat: dict[str, Any] = expand(schema, frozenset())
    flat["$defs"] = defs
    return flat


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """`{"anyOf": [<plain typed value>, {"type": "null"}]}` as the value with "null" among its types."""
    options = node.get("anyOf")
    if set(node) - {"anyOf", "description"} or not isinstance(options, list) or len(options) != 2:
        return node
    value, null = options
    if null != {"type": "null"} or not isinstance(value, dict) or "type" not in value:
        return node
    if set(value) - PLAIN_KEYS - {"description"}:
        return node
    types = value["type"] if isinstance(value["type"], list) else [value["type"]]
    return {
        **value,
        **({"description": node["description"]} if "description" in node else {}),
        "type": [*types, "null"],
    }


@cache
def _validator() -> jsonschema.protocols.Validator:
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(inlined(schema))


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


def shape_errors(error: ValidationError, limit: int = 5) -> str:
    """Where the report's model refused it, as `path: message` joined by "; " (analysis.build.typed)."""
    lines = [f"{'/'.join(map(str, e['loc'])) or '(top level)'}: {e['msg'][:200]}" for e in error.errors()]
    return "; ".join(lines[:limit])


def check_report(report: Report | dict[str, Any]) -> None:
    """ReportShapeError naming the first fields where the report's JSON (or a parsed report) breaks the
    schema. It is checked as JSON text would be read back, not as the objects that built it."""
    from kvgate.report.render.formats import render_json

    text = json.dumps(report) if isinstance(report, dict) else render_json(report)
    errors = report_errors(json.loads(text))
    if errors:
        raise ReportShapeError("the report does not fit its schema: " + "; ".join(errors))
