"""An arm's proof of treatment from the engine's own counters (analysis.proof)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from kvgate.report.document.base import Count, NonNegative, Shape, Text


def _shown_has_nothing_missing(schema: dict[str, Any]) -> None:
    schema["if"] = {"properties": {"status": {"const": "shown"}}}
    schema["then"] = {"properties": {"missing": {"maxItems": 0}}}
    schema["else"] = {"properties": {"missing": {"minItems": 1}}}


class Proof(Shape):
    """The arm's proof of treatment from the engine's own counters, over every pass (analysis.proof); null
    figures: not applicable to the arm's kind, or not counted by the engine. Shown: nothing missing;
    missing: at least one line saying what."""

    model_config = ConfigDict(json_schema_extra=_shown_has_nothing_missing)

    status: Literal["shown", "missing"]
    missing: list[Text]
    passes: Count
    cases: Count
    kv_dtypes: list[Text] | None
    kv_quantized: Count | None
    kv_bytes_per_entry: NonNegative | None
    control_kv_bytes_per_entry: NonNegative | None
    kv_kept_share: NonNegative | None
    eviction_over_bound: Count | None
    tier_blocks_written: Count | None
    tier_blocks_read: Count | None
    cache_hit_cases: Count | None
    spans_reused: Count | None

    @model_validator(mode="after")
    def _status_matches_missing(self) -> Proof:
        if (self.status == "shown") == bool(self.missing):
            raise PydanticCustomError(
                "proof", "status {status} with {n} missing", {"status": self.status, "n": len(self.missing)}
            )
        return self
