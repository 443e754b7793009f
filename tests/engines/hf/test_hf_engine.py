"""The hf engine through its interface: what it refuses, namespaces that never share cached KV, and a
composite (reuse at prefill → FP8 → offload → decode) that matches FP8 alone token for token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hf_engine_support import passkey_cases, run_arm

from kvgate.engines.base import ArmSetup
from kvgate.engines.registry import engine_info
from kvgate.treatments.spec import Composite, Eviction, Full, Offload, Quantize, Reuse, Treatment
from kvgate.workload.case import Case

pytest.importorskip("transformers")


def test_the_registry_lists_offload_and_reuse_for_hf() -> None:
    assert {"offload", "reuse"} <= set(engine_info("hf").kinds)


@pytest.fixture(scope="module")
def case(model_folder: Path) -> Case:
    return passkey_cases(model_folder, (0.5,), 2, 0)[0]


def setup(treatment: Treatment, namespace: str) -> ArmSetup:
    return ArmSetup(treatment.name, 0, treatment, namespace)


@pytest.mark.model
@pytest.mark.parametrize(
    "treatment",
    [
        Full("full"),
        Offload("host", tier="host"),
        Offload("disk", tier="disk", block_size=8),
        Reuse("prefix", mode="prefix"),
        Reuse("span", mode="span"),
        Composite("evict+reuse", of=(Eviction("s", method="streaming"), Reuse("r"))),
        Composite("evict+fp8+offload", of=(Eviction("k", method="knorm"), Quantize("q"), Offload("o"))),
    ],
    ids=lambda t: t.name,
)
def test_what_works_is_accepted(engine: Any, treatment: Treatment) -> None:
    assert engine.refusal(treatment) is None


@pytest.mark.model
@pytest.mark.parametrize("method", ["snapkv", "h2o", "tova"])
def test_reuse_with_query_aware_eviction_is_refused(engine: Any, method: str) -> None:
    treatment = Composite("x", of=(Eviction("e", method=method), Reuse("r", mode="prefix")))
    assert "query-aware eviction" in (engine.refusal(treatment) or "")


@pytest.mark.model
def test_sessions_never_share_cached_kv(engine: Any, case: Case) -> None:
    """Two reuse sessions open at once on one engine: only a session's own earlier cases warm it."""
    reuse = Reuse("prefix-reuse", mode="prefix", block_size=16)
    first, second = (
        engine.open(setup(reuse, "run:prefix-reuse:r0")),
        engine.open(setup(reuse, "run:prefix-reuse:r1")),
    )
    try:
        assert first.generate([case])[0].n_cached_tokens == 0
        assert second.generate([case])[0].n_cached_tokens == 0  # same prompt, other namespace: a miss
        again = second.generate([case])[0]
        assert again.n_cached_tokens > 0
        assert engine.prefix_cache.nbytes > 0
    finally:
        first.close()
        second.close()
    assert engine.prefix_cache.nbytes == 0  # closing sessions drops their blocks


@pytest.mark.model
def test_reuse_then_fp8_then_offload_matches_fp8_alone(engine: Any, case: Case) -> None:
    fp8 = Quantize("fp8", dtype="fp8_e4m3", scale="tensor")
    composite = Composite(
        "all", of=(Offload("o", tier="disk", block_size=8), fp8, Reuse("r", mode="prefix", block_size=16))
    )
    alone = run_arm(engine, fp8, [case])
    combined = run_arm(engine, composite, [case, case])
    assert all(g.error is None for g in alone + combined)
    assert [g.n_cached_tokens > 0 for g in combined] == [False, True]
    assert [g.output_token_ids for g in combined] == [alone[0].output_token_ids] * 2


def test_a_case_still_decoding_past_the_limit_is_a_timeout(engine: Any, case: Case) -> None:
    full = engine.open(setup(Full("full"), "limit"))
    (done,) = full.generate([case])
    engine.timeout_s = 1e-6  # any case decoding more than one token runs past it
    try:
        (late,) = full.generate([case])
    finally:
        engine.timeout_s = None
    assert len(done.output_token_ids) > 1 and done.error is None and not done.timed_out
    assert late.timed_out and late.output_token_ids == () and "per-case limit" in (late.error or "")
