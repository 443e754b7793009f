"""The building blocks every report object is made of: a base model that refuses unknown fields, and
the value types (names, counts, rates, bounded numbers) that both validate a report and state its schema.

A number keeps the type it was given (an int stays an int, so the JSON text does not change); a field
that may be left out is never null (`absent()`); constraints a JSON Schema generator cannot derive from
a type are stated once, as a validator and the schema fragment it checks (`Verdict`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, model_validator
from pydantic_core import PydanticCustomError, core_schema

from kvgate.gate.decision import EXIT_CODES
from kvgate.names import NAME_PATTERN


class Shape(BaseModel):
    """A report object: unknown fields refused, read-only, fields described by their docstrings; its
    validator is built when first used (`defer_build`): a report builds the one validator of the whole
    document, not one more per nested model as each class is defined."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, populate_by_name=True, defer_build=True
    )

    @model_validator(mode="before")
    @classmethod
    def _absent_is_not_null(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, key in _absent_fields(cls):
                if data.get(key, 0) is None:
                    raise PydanticCustomError("absent_not_null", f"{name} is left out, never null")
        return data


_ABSENT: dict[type, tuple[tuple[str, str], ...]] = {}
"""Per model: its fields that may be left out but never be null (`absent()`), as (name, key in the data),
found once (a report validates ~10,000 failing examples, each a model of ~10 fields)."""


def _absent_fields(model: type[BaseModel]) -> tuple[tuple[str, str], ...]:
    found = _ABSENT.get(model)
    if found is None:
        found = tuple(
            (name, info.alias or name)
            for name, info in model.model_fields.items()
            if info.json_schema_extra is _drop_null
        )
        _ABSENT[model] = found
    return found


def _drop_null(schema: dict[str, Any]) -> None:
    """A field that may be absent: its schema is its value's, without the null `X | None` adds."""
    options = schema.pop("anyOf", None)
    if options is None:
        return
    (value,) = [o for o in options if o != {"type": "null"}]
    schema.pop("default", None)
    schema.update(value)


def absent(description: str | None = None) -> Any:
    """A field a report may leave out (None here: absent from the JSON), never null when present."""
    return Field(default=None, json_schema_extra=_drop_null, description=description)


@dataclass(frozen=True)
class Bounded:
    """A JSON number within bounds; an int stays an int and a float a float (no bool, NaN or inf)."""

    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None

    def _check(self, value: float) -> float:
        if not math.isfinite(value):
            raise PydanticCustomError("finite", "a finite number is needed")
        below = (self.minimum is not None and value < self.minimum) or (
            self.exclusive_minimum is not None and value <= self.exclusive_minimum
        )
        above = (self.maximum is not None and value > self.maximum) or (
            self.exclusive_maximum is not None and value >= self.exclusive_maximum
        )
        if below or above:
            raise PydanticCustomError(
                "bounds", "{value} is outside {bounds}", {"value": value, "bounds": self._json()}
            )
        return value

    def _json(self) -> dict[str, float]:
        names = {
            "minimum": self.minimum,
            "maximum": self.maximum,
            "exclusiveMinimum": self.exclusive_minimum,
            "exclusiveMaximum": self.exclusive_maximum,
        }
        return {k: v for k, v in names.items() if v is not None}

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        number = core_schema.union_schema(
            [core_schema.int_schema(strict=True), core_schema.float_schema(strict=True)]
        )
        return core_schema.no_info_after_validator_function(self._check, number)

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        return {"type": "number", **self._json()}


def _pattern(pattern: str) -> Any:
    return StringConstraints(strict=True, pattern=pattern)


Name = Annotated[str, _pattern(NAME_PATTERN)]
"""An arm, treatment or column name (kvgate.names)."""
Hex64 = Annotated[str, _pattern(r"^[0-9a-f]{64}$")]
RunId = Annotated[str, _pattern(r"^([0-9]{8}T[0-9]{6}\.[0-9]{3}Z-)?[0-9a-f]{12}$")]
"""<UTC creation time>-<12 hex digits of the spec hash>; a bare spec hash names a run made before run ids
carried the time."""
SliceName = Annotated[str, _pattern(r"^(all|critical|[A-Za-z0-9][A-Za-z0-9._+-]{0,63}=.+)$")]
"""'all', 'critical', or column=value joined by '/' (task=passkey/ctx_bucket=4k)."""
Text = Annotated[str, StringConstraints(strict=True, min_length=1)]
"""A non-empty string."""
Str = Annotated[str, StringConstraints(strict=True)]
Count = Annotated[int, Field(strict=True, ge=0)]
Positive = Annotated[int, Field(strict=True, ge=1)]
Rate = Annotated[float, Bounded(minimum=0, maximum=1)]
"""A share or probability in [0, 1]."""
Delta = Annotated[float, Bounded(minimum=-1, maximum=1)]
"""A difference of two rates."""
NonNegative = Annotated[float, Bounded(minimum=0)]
Confidence = Annotated[float, Bounded(minimum=0.5, exclusive_maximum=1)]
Labels = dict[Name, Str]
"""Slice column → value."""
Object = dict[str, Any]
"""A JSON object whose keys the report does not fix (engine arguments, -E options)."""

Decision = Literal["pass", "fail", "inconclusive", "error"]
"""An arm's or the run's decision."""
SliceDecision = Literal["pass", "fail", "inconclusive"]
"""A slice's decision (errors belong to arms)."""
Change = Literal["same", "regression", "improvement", "new", "removed"]


def _not_bool(value: Any) -> Any:
    """JSON's true is not the number 1 (Python's True == 1 would pass a literal 1)."""
    if isinstance(value, bool):
        raise PydanticCustomError("not_bool", "a number is needed, not a bool")
    return value


ExitCode = Annotated[Literal[0, 1, 3, 4], BeforeValidator(_not_bool)]
Kind = Literal["full", "eviction", "quantize", "offload", "reuse", "composite"]


def unique(items: list[Any]) -> list[Any]:
    """`items` when no two are equal (JSON Schema's uniqueItems)."""
    if len(set(items)) != len(items):
        raise PydanticCustomError("unique", "items must be unique")
    return items


UNIQUE = {"uniqueItems": True}


VERDICT = "A decision with the exit code it maps to (kvgate.gate.decision.EXIT_CODES)."


def _verdict_schema(schema: dict[str, Any]) -> None:
    ties = [
        {"properties": {"decision": {"const": d}, "exit_code": {"const": c}}} for d, c in EXIT_CODES.items()
    ]
    schema.setdefault("allOf", []).append({"description": VERDICT, "oneOf": ties})


class Verdict(Shape):
    """A decision with the exit code it maps to (kvgate.gate.decision.EXIT_CODES)."""

    model_config = ConfigDict(json_schema_extra=_verdict_schema)

    @model_validator(mode="after")
    def _exit_code_is_the_decisions(self) -> Verdict:
        decision, code = getattr(self, "decision"), getattr(self, "exit_code")  # noqa: B009
        if decision is not None and EXIT_CODES[decision] != code:
            raise PydanticCustomError(
                "verdict", "exit code {code} is not {decision}'s", {"code": code, "decision": decision}
            )
        return self
