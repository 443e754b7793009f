"""A resolved treatment spec (kvgate.treatments.spec) as the run's manifest stores it, one model per kind;
`Treatment` picks the model by `kind`. Fields with a fixed set of values take the spec's own Literal
types, so the report refuses exactly the values the spec refuses."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictBool, StrictInt, model_validator
from pydantic_core import PydanticCustomError

from kvgate.report.document.base import Bounded, Confidence, Name, Object, Positive, Shape, absent
from kvgate.treatments.eviction_methods import EvictionMethodName
from kvgate.treatments.spec import Convention, GGMLType, KVDtype, ReuseMode, Scale, Scope, Tier

CERTIFICATE_SETTINGS = ("certificate_share", "certificate_floor", "certificate_confidence")


class SpecBase(Shape):
    name: Name
    engine_args: Object
    """Engine-specific arguments, in the engine's own names."""


class SpecFull(SpecBase):
    kind: Literal["full"]


def _certificate_needs_settings(schema: dict[str, Any]) -> None:
    schema["dependentRequired"] = {"certificate": list(CERTIFICATE_SETTINGS)}


class SpecEviction(SpecBase):
    model_config = ConfigDict(json_schema_extra=_certificate_needs_settings)

    kind: Literal["eviction"]
    method: EvictionMethodName
    ratio: Annotated[float, Bounded(minimum=0, exclusive_maximum=1)]
    scope: Scope
    sink_tokens: Annotated[int, Field(strict=True, ge=0)]
    window: Positive
    seed: StrictInt
    during_decoding: StrictBool
    certificate: StrictBool | None = absent()
    certificate_share: Annotated[float, Bounded(exclusive_minimum=0, maximum=1)] | None = absent()
    certificate_floor: Annotated[float, Bounded(exclusive_minimum=0, maximum=1)] | None = absent()
    certificate_confidence: Confidence | None = absent()
    convention: Convention | None = absent("Present only when not the default 'kvgate'.")

    @model_validator(mode="after")
    def _certificate_settings_given(self) -> SpecEviction:
        if "certificate" in self.model_fields_set:
            lacking = [s for s in CERTIFICATE_SETTINGS if s not in self.model_fields_set]
            if lacking:
                raise PydanticCustomError(
                    "certificate", "a certificate needs {lacking}", {"lacking": lacking}
                )
        return self


class SpecQuantize(SpecBase):
    kind: Literal["quantize"]
    dtype: KVDtype
    scale: Scale
    dtype_v: GGMLType | None = absent("V's llama.cpp cache type when it differs from K's (`dtype`).")


class SpecOffload(SpecBase):
    kind: Literal["offload"]
    tier: Tier
    block_size: Positive


class SpecReuse(SpecBase):
    kind: Literal["reuse"]
    mode: ReuseMode
    block_size: Positive


class SpecComposite(SpecBase):
    kind: Literal["composite"]
    of: Annotated[list[Treatment], Field(min_length=2)]


Treatment = Annotated[
    SpecFull | SpecEviction | SpecQuantize | SpecOffload | SpecReuse | SpecComposite,
    Field(discriminator="kind"),
]
"""A resolved treatment spec (kvgate.treatments.spec), as stored in the run's manifest."""

SpecComposite.model_rebuild()
