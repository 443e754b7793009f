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


@pytest.mark.model
def test_every_treatment_leaves_its_proof_in_the_counters(engine: Any, case: Case) -> None:
    """What analysis.proof reads: FP8 entries quantised and bytes halved, entries kept by eviction, blocks
    written to the tier and read back, cache hits of reuse; the control counts none of it."""
    (full,) = run_arm(engine, Full("full"), [case])
    (fp8,) = run_arm(engine, Quantize("fp8", dtype="fp8_e4m3"), [case])
    (evicted,) = run_arm(engine, Eviction("streaming", method="streaming", ratio=0.5), [case])
    (moved,) = run_arm(engine, Offload("host", tier="host", block_size=16), [case])
    reused = run_arm(engine, Reuse("prefix", mode="prefix"), [case, case])
    n = full.n_prompt_tokens
    assert (full.n_kv_quantized, full.n_tier_written, full.kv_dtype) == (0, 0, "float32")
    assert fp8.n_kv_quantized == n + len(fp8.output_token_ids) - 1  # the last token is never appended
    assert fp8.kv_dtype == "fp8_e4m3" and fp8.kv_bytes is not None and full.kv_bytes is not None
    assert fp8.kv_bytes * 4 == full.kv_bytes  # one byte per element against float32's four
    assert evicted.n_kv_entries_kept == n - round(0.5 * n) and evicted.kv_bytes < full.kv_bytes
    layers = engine.model.config.num_hidden_layers
    assert moved.n_tier_written == moved.n_tier_read == 2 * layers * -(-n // 16)
    assert [g.n_cached_tokens > 0 for g in reused] == [False, True]
