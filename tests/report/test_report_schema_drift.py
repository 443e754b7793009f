"""The shipped report schema is the one the report's models generate (`make schema` rewrites it), and
the models and the schema give the same verdict on reports with one value broken."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from kvgate.report.document.report import Report
from kvgate.report.document.schema_gen import main, report_schema, schema_text
from kvgate.report.schema import inlined

SHIPPED = Path(__file__).resolve().parents[2] / "reports" / "templates" / "report.schema.json"
GOLDEN = Path(__file__).resolve().parents[2] / "reports" / "examples" / "fixed.json"


def test_the_shipped_schema_is_the_generated_one() -> None:
    assert SHIPPED.read_text(encoding="utf-8") == schema_text(), (
        "reports/templates/report.schema.json differs from kvgate/report/document: run `make schema`"
    )


def test_the_check_fails_on_a_drifted_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    drifted = tmp_path / "report.schema.json"
    drifted.write_text(schema_text().replace('"minimum": 0', '"minimum": -1', 1), encoding="utf-8")
    assert main([str(drifted), "--check"]) == 1
    assert "make schema" in capsys.readouterr().err
    assert main([str(drifted)]) == 0 and main([str(drifted), "--check"]) == 0


def golden() -> dict[str, Any]:
    """The example report, its placeholders made values the schema takes."""
    text = GOLDEN.read_text(encoding="utf-8").replace('"<run_id>"', '"20260101T000000.000Z-0123456789ab"')
    data: dict[str, Any] = json.loads(text.replace('"<sha>"', '"' + "0" * 64 + '"'))
    return data


def test_the_model_prints_the_json_it_read() -> None:
    data = golden()
    assert Report.model_validate(data).json_data() == data


def _walk(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every value of `value`, the first two items of each list."""
    out = [path] if path else []
    if isinstance(value, dict):
        out += [p for k, v in value.items() for p in _walk(v, (*path, k))]
    elif isinstance(value, list):
        out += [p for i, v in enumerate(value[:2]) for p in _walk(v, (*path, i))]
    return out


def _put(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    where = out
    for step in path[:-1]:
        where = where[step]
    where[path[-1]] = value
    return out


def _model_takes(data: dict[str, Any]) -> bool:
    try:
        Report.model_validate(data)
    except ValidationError:
        return False
    return True


def _cut(value: Any) -> Any:
    """`value` with each list cut to its first two items (every kind of object is still in it)."""
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v) for v in value[:2]]
    return value


def test_the_model_and_its_schema_agree_on_broken_reports() -> None:
    """Values of the example report (two items of each list) replaced by a null, a negative, a share
    above 1, a string or a bool (250 drawn), and an unknown key added to every object: the model refuses
    exactly what the schema refuses."""
    schema = jsonschema.Draft202012Validator(inlined(report_schema()))
    data = _cut(golden())
    assert schema.is_valid(data)
    paths = _walk(data)
    objects = [p for p in [(), *paths] if isinstance(_get(data, p), dict)]
    replaced = [(p, v) for p in paths for v in (None, -1, 1.5, "x", True)]
    broken = [_put(data, p, v) for p, v in random.Random(0).sample(replaced, 250)]
    broken += [_put(data, (*p, "surprise"), 1) for p in objects]
    verdicts = [schema.is_valid(b) for b in broken]
    disagree = [b for b, fits in zip(broken, verdicts, strict=True) if fits != _model_takes(b)]
    assert not disagree, disagree[:1]
    assert verdicts.count(False) > len(broken) // 2


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        data = data[step]
    return data
