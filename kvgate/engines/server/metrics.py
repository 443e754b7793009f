"""The server's own counters, from its Prometheus `/metrics` text.

vLLM counts preempted requests in `vllm:num_preemptions` (exposed as `vllm:num_preemptions_total`, one
series per engine); the sum over its series is the server's count. A server without the metric, or
without `/metrics`, reports None: the pass record then says "not reported", never 0.
"""

from __future__ import annotations

import math

PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions")


def metric_sum(text: str, names: tuple[str, ...]) -> float | None:
    """The sum of every sample of the first of `names` that appears in `text`, else None."""
    for name in names:
        total, seen = 0.0, False
        for line in text.splitlines():
            if line.startswith("#") or not line.startswith(name):
                continue
            rest = line[len(name) :]
            if rest and rest[0] not in "{ ":
                continue  # another metric whose name starts with this one
            value = rest.rsplit("}", 1)[-1].split()
            try:
                number = float(value[0]) if value else math.nan
            except ValueError:
                continue
            if math.isfinite(number):
                total, seen = total + number, True
        if seen:
            return total
    return None


def preemptions(text: str) -> int | None:
    value = metric_sum(text, PREEMPTIONS)
    return None if value is None else int(value)
