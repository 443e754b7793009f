"""The batched hf engine against the unbatched one: an arm of every shipped kind and scope (and random
eviction, scored by per-layer generators) gives the same tokens and treatment counters whether its
cases run one at a time or as equal-length batches,
and a batch is one forward over its cases. Log-probabilities agree to 1e-3, or 1e-2 on FP8 arms: a
matrix product over B rows may round differently from one over a single row, and an entry a hair from
an FP8 rounding boundary then rounds the other way."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from hf_engine_support import passkey_cases

from kvgate.engines.base import ArmSetup, Generation
from kvgate.treatments.matrix import catalog_tables, parse_treatment
from kvgate.treatments.spec import Composite, Eviction, Offload, Quantize, Treatment
from kvgate.workload.case import Case

pytest.importorskip("transformers")

CATALOG = catalog_tables()
SHIPPED = [
    "full", "streaming-50", "snapkv-50", "snapkv-50-context", "streaming-50-cert", "fp8-e4m3",
    "snapkv-50+fp8", "offload-host", "span-reuse",
]  # fmt: skip
"""A shipped arm of every kind and scope; the certified and reuse arms run one at a time, in order (span
reuse depends on it). Conventions, the disk tier and prefix reuse change nothing a batch shares."""
EXTRA = [
    Eviction("random-50", method="random", seed=3),  # one generator per layer: scored row by row
    Quantize("fp8-token", scale="token"),
    Composite("knorm+fp8+offload", of=(Eviction("k", method="knorm"), Quantize("q"), Offload("o"))),
]
TREATMENTS = [parse_treatment(name, CATALOG, "catalog") for name in SHIPPED] + EXTRA


@pytest.fixture(scope="module")
def cases(model_folder: Path) -> list[Case]:
    """Two prompt lengths, two cases each, interleaved (the engine must group them): passkey cases with
    their first tokens cut off, their question kept."""
    base = passkey_cases(model_folder, (0.25, 0.75), 1, 0)
    shortest = min(len(c.prompt_token_ids or ()) for c in base)
    out = []
    for cut in (0, 5):
        for case in base:
            ids = case.prompt_token_ids or ()
            drop = len(ids) - shortest + cut
            start = None if case.question_start is None else case.question_start - drop
            out.append(dataclasses.replace(case, prompt_token_ids=ids[drop:], question_start=start))
    return [out[0], out[2], out[1], out[3]]


def generate(engine: Any, treatment: Treatment, cases: list[Case], batch_size: int) -> list[Generation]:
    setup = ArmSetup(
        treatment.name, 0, treatment, f"test:{treatment.name}:{batch_size}", batch_size=batch_size
    )
    session = engine.open(setup)
    try:
        return list(session.generate(cases))
    finally:
        session.close()


def counters(g: Generation) -> tuple[Any, ...]:
    """What the engine counted of the treatment: each batched case must count what it counts alone."""
    return (
        g.n_prompt_tokens, g.n_cached_tokens, g.n_kv_entries_kept, g.kv_bytes, g.kv_dtype, g.n_kv_quantized,
        g.n_tier_written, g.n_tier_read, g.n_spans_reused,
    )  # fmt: skip


def engine_folder(engine: Any) -> Path:
    from kvgate.models import model_folder

    return model_folder(engine.model_spec)


def batch_sizes(engine: Any) -> tuple[list[int], Any]:
    """A hook recording the batch size of every forward of the model, and its handle."""
    seen: list[int] = []

    def record(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        seen.append(int(kwargs["input_ids"].shape[0]))

    return seen, engine.model.register_forward_pre_hook(record, with_kwargs=True)


@pytest.mark.model
@pytest.mark.parametrize("treatment", TREATMENTS, ids=lambda t: t.name)
def test_batched_outputs_equal_one_at_a_time(engine: Any, cases: list[Case], treatment: Treatment) -> None:
    if engine.refusal(treatment) is not None:
        pytest.skip(engine.refusal(treatment))
    one_at_a_time = any(p.kind == "reuse" or getattr(p, "certificate", False) for p in treatment.parts())
    if any(p.kind == "reuse" for p in treatment.parts()):  # span reuse finds spans by the cases' own text
        cases = list(passkey_cases(engine_folder(engine), (0.25, 0.75), 2, 0))
    alone = generate(engine, treatment, cases, 1)
    seen, handle = batch_sizes(engine)
    try:
        together = generate(engine, treatment, cases, 4)
    finally:
        handle.remove()
    assert not any(g.error for g in alone + together), [g.error for g in alone + together]
    assert [g.output_token_ids for g in together] == [g.output_token_ids for g in alone]
    assert [g.output_text for g in together] == [g.output_text for g in alone]
    assert [counters(g) for g in together] == [counters(g) for g in alone]
    tolerance = 1e-2 if any(p.kind == "quantize" for p in treatment.parts()) else 1e-3
    for a, b in zip(alone, together, strict=True):
        assert a.mean_logprob is not None and b.mean_logprob is not None
        assert math.isclose(a.mean_logprob, b.mean_logprob, rel_tol=tolerance, abs_tol=tolerance / 10)
    assert max(seen) == (1 if one_at_a_time else 2)  # two lengths, two cases each: batches of two


@pytest.mark.model
def test_the_preallocated_cache_decodes_as_the_dynamic_one(engine: Any, cases: list[Case]) -> None:
    """Writing KV in place gives exactly what transformers' concatenating cache gives, logprobs too."""
    from transformers import DynamicCache

    treatment = parse_treatment("snapkv-50+fp8", CATALOG, "catalog")
    setup = ArmSetup(treatment.name, 0, treatment, "test:prealloc")
    session = engine.open(setup)
    try:
        preallocated = session.generate(cases[:2])
        session._cache = lambda capacity: DynamicCache(config=engine.model.config)
        dynamic = session.generate(cases[:2])
    finally:
        session.close()
    assert [(g.output_token_ids, g.mean_logprob, g.n_kv_entries_kept) for g in preallocated] == [
        (g.output_token_ids, g.mean_logprob, g.n_kv_entries_kept) for g in dynamic
    ]
