"""The hf engine through its interface: what it refuses, namespaces that never share cached KV, and a
composite (reuse at prefill → FP8 → offload → decode) that matches FP8 alone token for token."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from kvgate.engines.base import ArmSetup, Generation
from kvgate.engines.registry import engine_info
from kvgate.treatments.spec import Composite, Eviction, Full, Offload, Quantize, Reuse, Treatment
from kvgate.workload.case import Case

pytest.importorskip("transformers")


def test_the_registry_lists_offload_and_reuse_for_hf() -> None:
    assert {"offload", "reuse"} <= set(engine_info("hf").kinds)


@pytest.fixture(scope="module")
def engine(model_folder: Path) -> Iterator[Any]:
    """The hf engine on one thread: both arms of a comparison run alike, and a busy machine stays quick."""
    from kvgate.engines.hf.engine import HFEngine
    from kvgate.models import resolve_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield HFEngine(resolve_model("smollm2-135m"))
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def case(model_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Case:
    """One short passkey case frozen for the model's tokenizer."""
    from kvgate.workload.freeze import freeze_cases
    from kvgate.workload.hf_tokenizer import HFPromptTokenizer
    from kvgate.workload.suites import parse_suite

    spec = tmp_path_factory.mktemp("suite") / "tiny.toml"
    spec.write_text(
        'name = "tiny"\n[[generate]]\ngenerator = "passkey"\nlengths = [128]\ndepths = [0.5]\n'
        "max_new_tokens = 6\n"
    )
    tok = HFPromptTokenizer.from_folder(model_folder, "smollm2-135m")
    return freeze_cases([parse_suite(spec)], tok, seed=2)[0]


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
    control = engine.open(setup(Full("full"), "run:full:r0"))
    try:
        assert [g.n_cached_tokens for g in control.generate([case, case])] == [0, 0]
    finally:
        control.close()


@pytest.mark.model
def test_reuse_then_fp8_then_offload_matches_fp8_alone(engine: Any, case: Case) -> None:
    fp8 = Quantize("fp8", dtype="fp8_e4m3", scale="tensor")
    composite = Composite(
        "all", of=(Offload("o", tier="disk", block_size=8), fp8, Reuse("r", mode="prefix", block_size=16))
    )
    alone = run(engine, fp8, [case])
    combined = run(engine, composite, [case, case])
    assert all(g.error is None for g in alone + combined)
    assert [g.n_cached_tokens > 0 for g in combined] == [False, True]
    assert [g.output_token_ids for g in combined] == [alone[0].output_token_ids] * 2


def run(engine: Any, treatment: Treatment, cases: list[Case]) -> list[Generation]:
    session = engine.open(setup(treatment, f"test:{treatment.name}"))
    try:
        return list(session.generate(cases))
    finally:
        session.close()
