"""The fake engine through the engine interface: deterministic answers, planted faults that hit the
same cases in every arm, cache counters that reflect its namespaces, and engine failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvgate.engines.base import ArmSetup, Engine
from kvgate.engines.registry import create_engine
from kvgate.errors import BadInput
from kvgate.models import resolve_model
from kvgate.treatments.spec import Composite, Eviction, Full, Quantize, Reuse, Treatment
from kvgate.validators.registry import get_validator
from kvgate.workload.case import Case
from kvgate.workload.schema import read_workload

FULL, FP8, REUSE = Full("full"), Quantize("fp8"), Reuse("reuse")


@pytest.fixture
def engine() -> Engine:
    return create_engine("fake", resolve_model("smollm2-135m"))


@pytest.fixture(scope="module")
def cases(smoke_workload: Path) -> tuple[Case, ...]:
    return read_workload(smoke_workload).cases


def _setup(treatment: Treatment, namespace: str = "ns", **faults: Any) -> ArmSetup:
    return ArmSetup(arm=treatment.name, replicate=0, treatment=treatment, namespace=namespace, faults=faults)


def _passes(case: Case, text: str) -> bool:
    return get_validator(case.validator)(text, case.expected, case.validator_args).passed


def test_without_faults_every_case_passes_identically(engine: Engine, cases: tuple[Case, ...]) -> None:
    first = engine.open(_setup(FULL)).generate(cases)
    again = engine.open(_setup(FP8)).generate(cases)
    assert [g.output_token_ids for g in first] == [g.output_token_ids for g in again]
    assert all(_passes(c, g.output_text) and g.error is None for c, g in zip(cases, first, strict=True))
    assert all(
        g.n_cached_tokens == 0 and g.n_prompt_tokens == len(c.prompt_token_ids or ())
        for c, g in zip(cases, first, strict=True)
    )


def test_faults_hit_the_same_cases_in_every_arm(engine: Engine, cases: tuple[Case, ...]) -> None:
    wrong = [engine.open(_setup(t, wrong_answer_rate=0.3)).generate(cases) for t in (FP8, Eviction("ev"))]
    failed = [[not _passes(c, g.output_text) for c, g in zip(cases, gens, strict=True)] for gens in wrong]
    assert failed[0] == failed[1]
    assert 2 <= sum(failed[0]) <= 14
    reseeded = engine.open(_setup(FP8, wrong_answer_rate=0.3, seed=7)).generate(cases)
    assert [not _passes(c, g.output_text) for c, g in zip(cases, reseeded, strict=True)] != failed[0]


def test_planted_errors_are_generation_errors(engine: Engine, cases: tuple[Case, ...]) -> None:
    gens = engine.open(_setup(FP8, error_rate=0.5)).generate(cases)
    errors = [g for g in gens if g.error is not None]
    assert 4 <= len(errors) <= 20
    assert all(g.error == "planted engine error" and g.output_token_ids == () for g in errors)


def test_reuse_hits_within_its_namespace_only(engine: Engine, cases: tuple[Case, ...]) -> None:
    session = engine.open(_setup(REUSE, "a"))
    gens = session.generate(cases[:6])
    assert gens[0].n_cached_tokens == 0 and all(g.n_cached_tokens > 0 for g in gens[1:])
    fresh = engine.open(_setup(REUSE, "b")).generate(cases[:1])
    assert fresh[0].n_cached_tokens == 0  # a new session starts with an empty cache


def test_salt_leak_shows_hits_across_namespaces(engine: Engine, cases: tuple[Case, ...]) -> None:
    engine.open(_setup(FULL, "a", salt_leak=True)).generate(cases[:1])
    leaked = engine.open(_setup(FP8, "b", salt_leak=True)).generate(cases[:1])
    assert leaked[0].n_cached_tokens == len(cases[0].prompt_token_ids or ())
    engine.close()
    clean = engine.open(_setup(FP8, "c", salt_leak=True)).generate(cases[:1])
    assert clean[0].n_cached_tokens == 0


def test_stale_reuse_answers_with_another_cases_answer(engine: Engine, cases: tuple[Case, ...]) -> None:
    gens = engine.open(_setup(REUSE, stale_reuse_rate=1.0)).generate(cases[:4])
    assert _passes(cases[0], gens[0].output_text)  # nothing cached yet: nothing stale to serve
    assert not any(_passes(c, g.output_text) for c, g in zip(cases[1:4], gens[1:], strict=True))
    assert {g.output_text for g in gens[1:]} <= {
        g.output_text for g in engine.open(_setup(FULL)).generate(cases[:3])
    }


def test_crash_after_raises_from_generate(engine: Engine, cases: tuple[Case, ...]) -> None:
    session = engine.open(_setup(FP8, crash_after=3))
    assert len(session.generate(cases[:2])) == 2
    with pytest.raises(RuntimeError, match="planted engine crash after 3 cases"):
        session.generate(cases[2:4])


def test_eviction_keeps_the_remaining_share(engine: Engine, cases: tuple[Case, ...]) -> None:
    ev = Eviction("ev", ratio=0.5)
    both = Composite("ev+fp8", of=(ev, FP8))
    for treatment in (ev, both):
        (gen,) = engine.open(_setup(treatment)).generate(cases[:1])
        n = gen.n_prompt_tokens
        assert gen.n_kv_entries_kept == n - n // 2


@pytest.mark.parametrize(
    ("faults", "message"),
    [
        ({"wrong_rate": 0.1}, "unknown fault 'wrong_rate'"),
        ({"error_rate": 1.5}, "error_rate must be in [0, 1], got 1.5"),
        ({"latency_s": -1}, "latency_s must be a number in [0, 60.0], got -1"),
        ({"latency_s": float("inf")}, "latency_s must be a number in [0, 60.0], got inf"),
        ({"crash_after": -2}, "crash_after must be ≥ 0, got -2"),
        ({"crash_after": 2.5}, "crash_after must be an integer, got 2.5"),
    ],
)
def test_bad_faults_are_refused(engine: Engine, faults: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInput, match=message.replace("[", r"\[").replace("]", r"\]")):
        engine.open(_setup(FP8, **faults))


def test_options_are_refused() -> None:
    with pytest.raises(BadInput, match="engine 'fake' takes only -E timeout_s, got device"):
        create_engine("fake", resolve_model("smollm2-135m"), device="cuda")
    for bad in (0, -1.0, float("nan"), "1", True):
        with pytest.raises(BadInput, match="timeout_s must be a number of seconds"):
            create_engine("fake", resolve_model("smollm2-135m"), timeout_s=bad)


def test_a_case_past_the_time_limit_is_a_timeout(cases: tuple[Case, ...]) -> None:
    engine = create_engine("fake", resolve_model("smollm2-135m"), timeout_s=0.01)
    assert engine.fingerprint()["timeout_s"] == 0.01
    slow, quick = engine.open(_setup(FP8, latency_s=0.05)), engine.open(_setup(FP8, latency_s=0.001))
    (late,), (done,) = slow.generate(cases[:1]), quick.generate(cases[:1])
    assert late.timed_out and late.output_token_ids == () and "0.01 s" in (late.error or "")
    assert 0.01 <= late.latency_s < 0.05
    assert not done.timed_out and done.error is None
