"""report.document.base: a field a report may leave out (`absent()`) is refused when null, in the model
that declares it and in one that inherits it, by its name or its alias; left out or given, it is taken."""

from __future__ import annotations

import pytest
from pydantic import Field, ValidationError

from kvgate.report.document.base import Shape, absent


class Outer(Shape):
    kept: int
    note: str | None = absent()


class Inner(Outer):
    extra: int | None = absent()
    named: int | None = Field(default=None, alias="shown", json_schema_extra=absent().json_schema_extra)


@pytest.mark.parametrize(
    ("model", "data", "field"),
    [
        (Outer, {"kept": 1, "note": None}, "note"),
        (Inner, {"kept": 1, "note": None}, "note"),
        (Inner, {"kept": 1, "extra": None}, "extra"),
        (Inner, {"kept": 1, "shown": None}, "named"),
    ],
)
def test_a_null_absent_field_is_refused(model: type[Shape], data: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError, match=f"{field} is left out, never null"):
        model.model_validate(data)


def test_an_absent_field_left_out_or_given_is_taken() -> None:
    assert Outer.model_validate({"kept": 1}).note is None
    assert Outer.model_validate({"kept": 1, "note": "n"}).note == "n"
    inner = Inner.model_validate({"kept": 2, "extra": 3, "shown": 4})
    assert (inner.extra, inner.named, inner.note) == (3, 4, None)
    assert Inner.model_validate({"kept": 2}).model_dump(exclude_none=True) == {"kept": 2}
