"""llama.cpp's own counters checked against what the arm is (docs/reference.md, "Isolation").

Before a case's prompt is evaluated, the positions llama.cpp's memory holds for the sequence are the
case's cached tokens; its performance counters then say how many prompt tokens it evaluated. The two must
add up to the prompt, and an arm that may not reuse must start every case from an empty memory: a position
left over from the previous case (llama-cpp-python's `Llama.generate` keeps the longest common prefix of
consecutive prompts unless told otherwise) is KV reused across cases, which only a reuse arm may do.
"""

from __future__ import annotations


def prompt_contradiction(
    arm: str, reuses: bool, case_id: str, n_prompt: int, cached: int, evaluated: int
) -> str | None:
    """Why the counters of one case contradict the arm, or None."""
    if cached + evaluated != n_prompt:
        return (
            f"arm {arm!r}, case {case_id}: llama.cpp held {cached} cached positions and evaluated "
            f"{evaluated} tokens of a {n_prompt}-token prompt: its counters do not add up"
        )
    if not reuses and cached > 0:
        return (
            f"arm {arm!r} may not reuse KV, yet llama.cpp's memory held {cached} positions of an earlier "
            f"case when case {case_id} began: KV crossed cases"
        )
    return None


def kv_type_contradiction(arm: str, asked: tuple[str, str], reported: tuple[str, str] | None) -> str | None:
    """Why the KV cache types llama.cpp reported allocating are not the arm's, or None."""
    if reported is None:
        return f"arm {arm!r}: llama.cpp did not report the KV cache types it allocated"
    if reported != asked:
        return (
            f"arm {arm!r} asked for K {asked[0]}, V {asked[1]}, but llama.cpp allocated "
            f"K {reported[0]}, V {reported[1]}"
        )
    return None


def state_size_contradiction(arm: str, expected: int, measured: float, tolerance: int) -> str | None:
    """Why the bytes one cached token takes in llama.cpp's sequence state are not the arm's KV types', or
    None: `expected` is every layer's K and V row in the arm's types, `tolerance` the per-cell bookkeeping."""
    if not expected <= measured <= expected + tolerance:
        return (
            f"arm {arm!r}: a cached token takes {measured:.1f} bytes of llama.cpp's state, but K and V rows "
            f"in the arm's types take {expected}: the cache does not hold what the arm asks"
        )
    return None
