"""The report JSON Schema (`reports/templates/report.schema.json`) generated from the report document's
models: `make schema` writes it, `python -m kvgate.report.document.schema_gen --check` fails when the
committed file differs from what the models generate (tests/report/test_report_schema_drift.py).

Pydantic writes the schema; two small steps make it as strict as the models: a dict whose keys match a
pattern names them with `propertyNames` (pydantic's `patternProperties` would let other keys through),
and titles are left out (the field names say it), each description on one line. Ties between fields (a
decision's exit code, a proof's status and its missing lines, an eviction certificate's settings) are
each model's `json_schema_extra`, written beside the validator that checks them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from kvgate.report.document.report import SCHEMA, Report

HEAD = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"urn:kvgate:report:{SCHEMA}",
    "title": "kvgate report JSON",
}
GENERATED_NOTE = "Generated from kvgate/report/document by `make schema`; do not edit by hand. "


class ReportSchema(GenerateJsonSchema):
    """Pydantic's generator with constrained dict keys stated as `propertyNames`."""

    def dict_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        out = super().dict_schema(schema)
        patterns = out.pop("patternProperties", None)
        if patterns:
            ((pattern, values),) = patterns.items()
            out["propertyNames"] = {"pattern": pattern}
            out["additionalProperties"] = values
        return out


def _tidied(node: Any, in_properties: bool = False) -> Any:
    """`node` without "title" keywords (a property called title would stay), each description on one
    line."""
    if isinstance(node, list):
        return [_tidied(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: _tidied(v, k == "properties" and not in_properties)
        for k, v in node.items()
        if in_properties or k != "title"
    }
    if not in_properties and isinstance(out.get("description"), str):
        out["description"] = " ".join(out["description"].split())
    return out


def report_schema() -> dict[str, Any]:
    """The report JSON's schema as the models state it."""
    body = Report.model_json_schema(
        by_alias=True, ref_template="#/$defs/{model}", schema_generator=ReportSchema
    )
    body = _tidied(body)
    body["description"] = GENERATED_NOTE + body.get("description", "")
    return {**HEAD, **body}


def schema_text() -> str:
    return json.dumps(report_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="the schema file to write or check")
    parser.add_argument("--check", action="store_true", help="fail when the file differs, write nothing")
    args = parser.parse_args(argv)
    text = schema_text()
    if args.check:
        if not args.path.exists() or args.path.read_text(encoding="utf-8") != text:
            print(f"{args.path} differs from the report models: run `make schema`", file=sys.stderr)
            return 1
        return 0
    args.path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
