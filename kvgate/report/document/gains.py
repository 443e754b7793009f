"""What an arm buys against the control in the same run (analysis.evidence): KV kept, KV bytes, timings."""

from __future__ import annotations

from typing import Literal

from kvgate.report.document.base import Count, NonNegative, Shape


class Spread(Shape):
    median: NonNegative | None
    p95: NonNegative | None


class Timing(Shape):
    """Median and p95 over the pairs both arms measured, and candidate ÷ control of each."""

    n: Count
    control: Spread
    candidate: Spread
    ratio: Spread


class KVBytes(Shape):
    """The arm's KV bytes as a share of the control's, from the engine's count or the spec's bits."""

    share: NonNegative
    source: Literal["engine", "spec"]
    bits: Literal[8, 16, 32] | None
    control_bits: Literal[8, 16, 32] | None


class MeasuredKVBytes(Shape):
    """KV bytes the engine counted for both arms over the pairs where it counted them (analysis.evidence)."""

    pairs: Count
    bytes: Count
    control_bytes: Count
    share: NonNegative
    bytes_per_entry: NonNegative | None
    control_bytes_per_entry: NonNegative | None


class Gains(Shape):
    """What the arm buys against the control in the same run (analysis.evidence)."""

    n_pairs: Count
    kv_kept: NonNegative | None
    kv_kept_median: NonNegative | None
    kv_pairs: Count
    ttft_s: Timing
    latency_s: Timing
    kv_bytes: KVBytes | None
    measured_kv_bytes: MeasuredKVBytes | None
