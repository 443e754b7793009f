"""Which cases the hf engine generates together: equal prompt lengths, never padded.

Cases of one batch share their prompt length n, the span compressed before the question (scope
"context") and max_new_tokens, so the batch runs as one [B, n] prefill and [B, 1] decode steps with no
padding and no attention mask: every row reads only its own keys, at the positions it would alone.
Left-padding two lengths into one batch costs more than running them apart, so lengths are never mixed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kvgate.workload.case import Case


def length_batches(cases: Sequence[Case], size: int, span: Callable[[Case], int]) -> list[list[int]]:
    """Indices into `cases`, grouped by (prompt length, span, max_new_tokens) in order of first
    appearance, each group cut into batches of at most `size`."""
    groups: dict[tuple[int, int, int], list[int]] = {}
    for index, case in enumerate(cases):
        n = len(case.prompt_token_ids or ())
        groups.setdefault((n, span(case), case.max_new_tokens), []).append(index)
    return [group[i : i + size] for group in groups.values() for i in range(0, len(group), max(1, size))]
