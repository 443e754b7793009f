"""The llamacpp engine for real: llama.cpp on the embedded model's own GGUF, a few short passkey cases.

Every claim is read back from llama.cpp: the positions its memory holds, the tokens it evaluated, the KV
types it allocated, the state it saved and loaded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.passkey_cases import passkey_cases

from kvgate.engines.base import ArmSetup, Generation
from kvgate.engines.llamacpp.context_shift import plan_shift
from kvgate.engines.llamacpp.engine import (
    CORRUPT_OFFLOAD_FAULT,
    PLANTED_REUSE_FAULT,
    LlamaCppEngine,
)
from kvgate.errors import BadInput, EngineFailure, TreatmentRefused
from kvgate.models import ModelSpec, resolve_model
from kvgate.treatments.spec import Composite, Eviction, Full, Offload, Quantize, Reuse, Treatment
from kvgate.workload.case import Case

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def cases(model_folder: Path) -> list[Case]:
    """Four passkey cases of ~300 prompt tokens (12 new tokens), frozen for the model's tokenizer."""
    return list(passkey_cases(model_folder, 300, (0.2, 0.8), per_cell=2, max_new_tokens=12))


@pytest.fixture(scope="module")
def engine() -> Iterator[LlamaCppEngine]:
    engine = LlamaCppEngine(resolve_model("smollm2-135m"), threads=1, n_ctx=1024)
    yield engine
    engine.close()


def run(
    engine: LlamaCppEngine, treatment: Treatment, cases: list[Case], faults: dict[str, Any] | None = None
) -> list[Generation]:
    session = engine.open(
        ArmSetup(treatment.name, 0, treatment, f"test:{treatment.name}", faults=faults or {})
    )
    try:
        return session.generate(cases)
    finally:
        session.close()


@pytest.fixture(scope="module")
def control(engine: LlamaCppEngine, cases: list[Case]) -> list[Generation]:
    return run(engine, Full("full"), cases)


def test_the_control_answers_from_an_empty_cache_every_case(
    control: list[Generation], cases: list[Case]
) -> None:
    assert all(g.error is None for g in control), [g.error for g in control]
    assert [g.n_cached_tokens for g in control] == [0] * len(cases)
    assert [g.n_prompt_tokens for g in control] == [len(c.prompt_token_ids or ()) for c in cases]
    assert {(g.kv_dtype, g.n_kv_quantized, g.n_tier_read) for g in control} == {("f16", 0, 0)}
    answered = sum(str(c.expected[0]) in g.output_text for c, g in zip(cases, control, strict=True))
    assert answered >= len(cases) // 2, [g.output_text for g in control]


def test_a_planted_cross_case_reuse_is_caught_by_the_counters(
    engine: LlamaCppEngine, cases: list[Case]
) -> None:
    """The library's default (keep the previous prompt's common prefix) on the control: llama.cpp's
    memory holds the earlier case's positions when the next begins, and the session says so."""
    with pytest.raises(EngineFailure, match="KV crossed cases"):
        run(engine, Full("full"), cases[:2], faults={PLANTED_REUSE_FAULT: True})


def test_prefix_reuse_reads_cached_tokens_and_answers_as_the_control(
    engine: LlamaCppEngine, cases: list[Case], control: list[Generation]
) -> None:
    reuse = run(engine, Reuse("prefix-reuse"), cases)
    assert reuse[0].n_cached_tokens == 0
    assert all(g.n_cached_tokens > 0 for g in reuse[1:]), [g.n_cached_tokens for g in reuse]
    assert [g.output_token_ids for g in reuse] == [g.output_token_ids for g in control]


@pytest.mark.parametrize("tier", ["host", "disk"])
def test_offload_round_trips_the_state_and_answers_as_the_control(
    engine: LlamaCppEngine, cases: list[Case], control: list[Generation], tier: str
) -> None:
    out = run(engine, Offload(f"offload-{tier}", tier=tier), cases[:2])
    assert [g.output_token_ids for g in out] == [g.output_token_ids for g in control[:2]]
    assert all(g.n_tier_read == g.n_tier_written == -(-g.n_kv_entries_kept // 16) for g in out)
    corrupt = run(engine, Offload("bad", tier=tier), cases[:1], faults={CORRUPT_OFFLOAD_FAULT: True})
    assert corrupt[0].error is not None and "offload" in corrupt[0].error


@pytest.mark.parametrize(("dtype", "share"), [("q8_0", 34 / 64), ("q4_0", 18 / 64)])
def test_quantised_kv_is_what_llama_cpp_allocates(
    engine: LlamaCppEngine, cases: list[Case], control: list[Generation], dtype: str, share: float
) -> None:
    """The state's bytes per value against f16's 2: a 32-value block takes 34 bytes (q8_0), 18 (q4_0)."""
    treatment = Quantize(dtype, dtype=dtype)
    session = engine.open(ArmSetup(dtype, 0, treatment, f"test:{dtype}"))
    try:
        out = session.generate(cases[:2])
        assert session.ctx.reported_kv_types == (dtype, dtype)
        assert session.proven
    finally:
        session.close()
    assert all(g.error is None and g.n_cached_tokens == 0 for g in out)
    for gen, full in zip(out, control, strict=False):
        assert gen.kv_dtype == dtype and gen.n_kv_quantized and gen.n_kv_quantized > gen.n_prompt_tokens
        assert gen.kv_bytes and full.kv_bytes
        assert gen.kv_bytes / full.kv_bytes == pytest.approx(share, abs=0.02)


def test_k_and_v_in_their_own_types(engine: LlamaCppEngine, cases: list[Case]) -> None:
    session = engine.open(ArmSetup("kv", 0, Quantize("kv", dtype="q8_0", dtype_v="q4_0"), "test:kv"))
    try:
        assert session.generate(cases[:1])[0].error is None
        assert session.ctx.reported_kv_types == ("q8_0", "q4_0")
    finally:
        session.close()


@pytest.mark.parametrize("scope", ["prompt", "context"])
def test_the_context_shift_keeps_sinks_and_the_recent_half(
    engine: LlamaCppEngine, cases: list[Case], scope: str
) -> None:
    eviction = Eviction("streaming-50", ratio=0.5, sink_tokens=4, scope=scope)
    out = run(engine, eviction, cases[:2])
    for case, gen in zip(cases, out, strict=False):
        n = len(case.prompt_token_ids or ())
        span = n if scope == "prompt" else int(case.question_start or 0)
        assert gen.error is None, gen.error
        assert gen.n_kv_entries_kept == n - plan_shift(span, eviction).n_discard


def test_a_composite_of_eviction_and_q8_0_runs(engine: LlamaCppEngine, cases: list[Case]) -> None:
    both = Composite("streaming+q8", of=(Eviction("streaming-50"), Quantize("q8_0", dtype="q8_0")))
    assert run(engine, both, cases[:1])[0].error is None


@pytest.mark.parametrize(
    ("treatment", "words"),
    [
        (Quantize("fp8", dtype="fp8_e4m3"), "llama.cpp's KV cache types are"),
        (Eviction("snapkv", method="snapkv"), "method 'streaming' only"),
        (Reuse("span", mode="span"), "prefix only"),
        (Composite("r+e", of=(Reuse("r"), Eviction("e"))), "reuse cannot follow eviction"),
        (Quantize("q", dtype="q8_0", engine_args={"type_k": 8}), "engine_args"),
    ],
)
def test_what_llama_cpp_cannot_apply_is_refused_before_generating(
    engine: LlamaCppEngine, treatment: Treatment, words: str
) -> None:
    assert words in (engine.refusal(treatment) or "")
    with pytest.raises(TreatmentRefused, match="engine 'llamacpp' refuses arm"):
        engine.open(ArmSetup(treatment.name, 0, treatment, "test:refused"))


def test_a_gguf_file_by_path_answers_as_the_embedded_model(
    engine: LlamaCppEngine, cases: list[Case], control: list[Generation]
) -> None:
    model = resolve_model(str(engine.path))
    assert model.is_gguf() and model.gguf_path() == engine.path.resolve()
    by_path = LlamaCppEngine(model, threads=1)
    try:
        assert by_path.settings.n_ctx == by_path.model.n_ctx_train == 8192  # the model's, by default
        assert run(by_path, Full("full"), cases[:1])[0].output_token_ids == control[0].output_token_ids
    finally:
        by_path.close()


def test_the_fingerprint_and_what_is_not_a_gguf(engine: LlamaCppEngine) -> None:
    fingerprint = engine.fingerprint()
    assert fingerprint["engine"] == "llamacpp" and fingerprint["llama_cpp_python"]
    assert "CPU" in fingerprint["system_info"]
    with pytest.raises(BadInput, match="loads a GGUF file"):
        LlamaCppEngine(ModelSpec("folder", "a model folder", folder=Path("/nonexistent")))


def test_a_prompt_longer_than_the_context_fails_that_case_alone(
    engine: LlamaCppEngine, cases: list[Case]
) -> None:
    long = Case("long", "s", "t", (), 8, "exact", "x", {}, None, False, {}, tuple([1] * 1100), 1100)
    out = run(engine, Full("full"), [long, cases[0]])
    assert out[0].error is not None and "-E n_ctx" in out[0].error
    assert out[1].error is None
