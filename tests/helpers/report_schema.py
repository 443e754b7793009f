"""The report JSON checked against its shipped schema, for every test that reads a report.

The test suite also runs with KVGATE_CHECK_REPORT=1 (tests/conftest.py), so every report the CLI renders,
in process or in a child process, is checked before it is printed.
"""

from __future__ import annotations

import json
from typing import Any

from kvgate.report.schema import report_errors


def assert_fits_schema(report: Any) -> None:
    """The parsed report JSON fits `reports/templates/report.schema.json`."""
    errors = report_errors(report)
    assert not errors, "the report JSON does not fit its schema:\n" + "\n".join(errors)


def report_json(text: str) -> dict[str, Any]:
    """Report JSON text, parsed and checked against the schema."""
    report: dict[str, Any] = json.loads(text)
    assert_fits_schema(report)
    return report
