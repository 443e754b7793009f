"""The certificate on the embedded model: it only observes (outputs token-identical to the same arm
without it), it reports per case, it is refused where it cannot apply, and its replay covers."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from hf_engine_support import passkey_cases, run_arm

from kvgate.engines.base import ArmSetup
from kvgate.engines.hf.certificate.replay import TOLERANCE, replay
from kvgate.treatments.spec import Composite, Eviction, Quantize
from kvgate.workload.case import Case

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def cases(model_folder: Path) -> list[Case]:
    return list(passkey_cases(model_folder, (0.5,), 2, 0))


@pytest.mark.model
@pytest.mark.parametrize("method", ["streaming", "snapkv"])
def test_the_certificate_only_observes(engine: Any, cases: list[Case], method: str) -> None:
    plain = run_arm(engine, Eviction(method, method=method, ratio=0.75), cases)
    certified = run_arm(
        engine, Eviction(f"{method}-cert", method=method, ratio=0.75, certificate=True), cases
    )
    for without, with_ in zip(plain, certified, strict=True):
        assert with_.error is None
        assert with_.output_token_ids == without.output_token_ids
        assert without.certificate_bound_max is None
        assert with_.certificate_bound_max is not None and with_.certificate_bound_mean is not None
        assert with_.certificate_estimate_mean is not None
        assert with_.certificate_bound_max >= with_.certificate_bound_mean > 0
        assert with_.certificate_bound_mean >= with_.certificate_estimate_mean > 0
        relative, estimate = with_.certificate_relative_bound_mean, with_.certificate_relative_estimate_mean
        assert relative is not None and estimate is not None and relative >= estimate > 0
        assert with_.certificate_cap_share is not None and 0.0 <= with_.certificate_cap_share <= 1.0


@pytest.mark.model
def test_the_certificate_reads_the_preallocated_cache_as_the_dynamic_one(
    engine: Any, cases: list[Case]
) -> None:
    """A certified arm decodes on the preallocated cache its plain arm uses: the same tokens and the same
    certificate as on transformers' concatenating cache (what certified arms decoded on before)."""
    from transformers import DynamicCache

    treatment = Eviction("snapkv-cert", method="snapkv", ratio=0.5, certificate=True)
    session = engine.open(ArmSetup(treatment.name, 0, treatment, "test:cert-prealloc"))
    try:
        (preallocated,) = session.generate(cases[:1])
        session._cache = lambda capacity: DynamicCache(config=engine.model.config)
        (dynamic,) = session.generate(cases[:1])
    finally:
        session.close()
    assert preallocated.output_token_ids == dynamic.output_token_ids
    for name in ("bound_max", "bound_mean", "estimate_mean", "relative_bound_mean", "cap_share"):
        a, b = getattr(preallocated, f"certificate_{name}"), getattr(dynamic, f"certificate_{name}")
        assert a is not None and b is not None and math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-7), name


@pytest.mark.model
def test_the_certificate_is_refused_in_a_composite(engine: Any) -> None:
    treatment = Composite("c", of=(Eviction("e", certificate=True), Quantize("q")))
    assert "eviction arm alone" in (engine.refusal(treatment) or "")
    assert engine.refusal(Eviction("e", certificate=True)) is None


@pytest.mark.model
def test_the_certificate_is_refused_where_the_question_is_prefilled_after_eviction(engine: Any) -> None:
    reason = engine.refusal(Eviction("e", scope="context", certificate=True)) or ""
    assert "scope 'context'" in reason and "uncertified" in reason
    assert engine.refusal(Eviction("e", scope="context")) is None


@pytest.mark.model
def test_replay_gives_every_cell_its_true_error_within_the_bound(engine: Any, cases: list[Case]) -> None:
    treatment = Eviction("s", method="streaming", ratio=0.5, certificate=True)
    (cells,) = replay(engine, treatment, cases[:1])
    config = engine.model.config
    per_step = config.num_hidden_layers * config.num_attention_heads
    assert cells.true.numel() % per_step == 0 and cells.true.numel() >= per_step
    assert float(cells.true.max()) > 0
    assert cells.covered / cells.true.numel() >= 0.9
    assert bool((cells.corrected <= cells.estimate + 1e-6).all()) and bool((cells.output_norm > 0).all())
    assert set(cells.layer.tolist()) == set(range(config.num_hidden_layers))
    assert set(cells.kv_head.tolist()) == set(range(config.num_key_value_heads))
    assert cells.step.shape == cells.true.shape == cells.capped.shape


@pytest.mark.model
def test_replay_draws_bound_every_cell_with_independent_samples(engine: Any, cases: list[Case]) -> None:
    treatment = Eviction("s", method="snapkv", ratio=0.75, certificate=True)
    (one,) = replay(engine, treatment, cases[:1])
    (cells,) = replay(engine, treatment, cases[:1], draws=4)
    assert torch.equal(cells.bound, one.bound) and torch.equal(cells.true, one.true)  # draw 0: the arm's own
    own = cells.true <= cells.bound.double() + TOLERANCE
    assert one.draws == 1 and torch.equal(one.covering_draws, own.long())
    assert cells.draws == 4 and int(cells.covering_draws.min()) >= 0 and int(cells.covering_draws.max()) <= 4
    assert bool((cells.covering_draws[own] >= 1).all()) and bool((cells.covering_draws[~own] <= 3).all())
    assert 0 < float(cells.covering_draws.double().mean()) / 4 <= 1
