"""The load and stress schedules an arm ran under, what its first pass's records counted, and its
block-boundary cases (analysis.stress)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictBool

from kvgate.report.document.base import Count, Positive, Shape, Str

Percent = Annotated[int, Field(strict=True, ge=0, le=100)]


class Load(Shape):
    concurrency: Positive
    kv_blocks: Positive | None
    abort_percent: Percent
    interleave: StrictBool
    resend_percent: Percent
    repeat: Positive


class StressCounts(Shape):
    """Summed over the first pass's sessions."""

    requests: Count
    timeouts: Count
    preemptions: Count | None
    aborts: Count
    interleaved: Count
    churned: Count
    resent: Count
    resend_changed: Count
    repeats: Count
    repeat_changed: Count


class BoundaryCases(Shape):
    """The arm's cases per block_edge label (prompts one token below, at and above a KV block)."""

    below: Count
    at: Count
    above: Count


class Stress(Shape):
    """The load and stress schedules the arm ran under (the matrix's [load] and [arm.<arm>], as the
    manifest records them), what its first pass's records counted, and its block-boundary cases
    (analysis.stress)."""

    load: Load
    schedule: Str
    """The load in words with the counts, as a divergence names it."""
    counts: StressCounts | None = Field(
        description="Summed over the first pass's sessions; null: no pass record (an engine that neither "
        "serves requests nor ran a schedule)."
    )
    boundary_cases: BoundaryCases | None = Field(
        description="The arm's cases per block_edge label (prompts one token below, at and above a KV "
        "block); null: the workload has no block_edge column."
    )
