"""vLLM's cache counters checked against what the arm is (docs/reference.md, "Isolation").

`RequestOutput.num_cached_tokens` counts the prompt tokens a request read from the prefix cache (local
blocks and, with a KV connector, blocks loaded from the offload tier). vLLM caches whole blocks and always
recomputes a prompt's last token, so a prompt of n tokens can hit at most ⌊(n − 1) / block_size⌋ blocks.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvgate.engines.base import Generation
from kvgate.workload.case import Case


def counter_contradiction(
    arm: str, reuses: bool, block_size: int, cases: Sequence[Case], generations: Sequence[Generation]
) -> str | None:
    """Why the counters contradict the arm, or None.

    An arm that may not reuse must read 0 cached tokens for every case (its namespace starts empty and
    prefix caching is off). A reuse arm, after its warm-up, must read more than 0 for every case whose
    prompt is longer than one block.
    """
    for case, gen in zip(cases, generations, strict=True):
        if gen.error is not None:
            continue
        if not reuses and gen.n_cached_tokens > 0:
            return (
                f"arm {arm!r} may not reuse KV, yet the engine served {gen.n_cached_tokens} prompt tokens of "
                f"case {case.case_id} from its cache: prefix caching or the cache salt leaks"
            )
        if reuses and gen.n_prompt_tokens > block_size and gen.n_cached_tokens == 0:
            return (
                f"reuse arm {arm!r} read 0 cached tokens for case {case.case_id} "
                f"({gen.n_prompt_tokens} prompt tokens, block size {block_size}) after its warm-up: "
                "the prefix cache did not serve it"
            )
    return None


def salt_leak(arm: str, probe_hits: int) -> str | None:
    """Why a probe under a fresh namespace that reads cached tokens proves the salts leak, or None."""
    if probe_hits == 0:
        return None
    return (
        f"arm {arm!r}: a request under a fresh cache salt read {probe_hits} cached tokens that another "
        "namespace computed: cache_salt does not isolate namespaces"
    )
