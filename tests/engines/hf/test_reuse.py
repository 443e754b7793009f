"""Prefix and span reuse on the hf engine: cache keying, LRU bounds, RoPE re-rotation, and on the model,
prefix reuse leaves every greedy output token-identical to the control."""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch
from hf_engine_support import passkey_cases, run_arm

from kvgate.engines.base import Generation
from kvgate.engines.hf.forward import forward_at
from kvgate.engines.hf.prefix_cache import PrefixCache, block_keys
from kvgate.engines.hf.rope_shift import rope_shift, rope_shift_refusal, rotary_embedding
from kvgate.engines.hf.span_reuse import SpanStore, context_span
from kvgate.treatments.spec import Full, Reuse
from kvgate.workload.case import Case

transformers = pytest.importorskip("transformers")

LAYERS = 2


def kv(n: int, fill: float = 1.0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer (keys, values) [1, 2, n, 4] whose entry at position p holds fill·(p + 1)."""
    column = (torch.arange(n, dtype=torch.float32) + 1).view(1, 1, n, 1) * fill
    return [(column.expand(1, 2, n, 4).clone(), -column.expand(1, 2, n, 4).clone()) for _ in range(LAYERS)]


BLOCK_BYTES = 2 * LAYERS * 2 * 4 * 4 * 4  # keys+values, layers, heads, block of 4 positions, D=4, float32


# --- keys ---------------------------------------------------------------------------------------------


def test_block_keys_chain_the_whole_prefix() -> None:
    a = block_keys("ns", [1, 2, 3, 4, 5, 6, 7, 8, 9], 4)
    b = block_keys("ns", [0, 2, 3, 4, 5, 6, 7, 8], 4)
    assert len(a) == 2  # the trailing partial block has no key
    assert a[0] != b[0]
    assert a[1] != b[1]  # same tokens in block 1, different prefix before it: a different key
    assert block_keys("ns", [1, 2, 3, 4, 5, 6, 7, 8], 4) == a


def test_the_namespace_and_block_size_are_part_of_every_key() -> None:
    tokens = list(range(8))
    assert set(block_keys("arm-a", tokens, 4)).isdisjoint(block_keys("arm-b", tokens, 4))
    assert block_keys("arm-a", tokens, 4)[1] != block_keys("arm-a", tokens, 8)[0]


# --- prefix cache ----------------------------------------------------------------------------------


def test_lookup_returns_the_longest_cached_block_aligned_prefix() -> None:
    store = PrefixCache(max_bytes=1 << 20)
    store.insert("ns", list(range(10)), 4, kv(10))
    hits = store.lookup("ns", [0, 1, 2, 3, 4, 5, 6, 7, 99, 99, 99, 99], 4)
    assert len(hits) == 2
    assert torch.equal(hits[1].layers[0][0][0, 0, :, 0], torch.tensor([5.0, 6.0, 7.0, 8.0]))
    assert len(store.lookup("ns", [0, 1, 2, 9, 4, 5, 6, 7], 4)) == 0
    assert len(store) == 2


def test_another_namespace_never_hits() -> None:
    store = PrefixCache(max_bytes=1 << 20)
    store.insert("run:full:r0", list(range(8)), 4, kv(8))
    assert store.lookup("run:full:r1", list(range(8)), 4) == []
    assert len(store.lookup("run:full:r0", list(range(8)), 4)) == 2


def test_blocks_are_copies_not_views_of_the_session_cache() -> None:
    store = PrefixCache(max_bytes=1 << 20)
    layers = kv(4)
    store.insert("ns", [0, 1, 2, 3], 4, layers)
    layers[0][0].zero_()
    assert store.lookup("ns", [0, 1, 2, 3], 4)[0].layers[0][0].abs().sum() > 0


def test_lru_by_bytes_evicts_the_least_recent_prefix_tail_first() -> None:
    store = PrefixCache(max_bytes=3 * BLOCK_BYTES)
    store.insert("ns", [1] * 8, 4, kv(8))  # prefix A: 2 blocks
    store.insert("ns", [2] * 4, 4, kv(4))  # prefix B: 1 block
    assert store.nbytes == 3 * BLOCK_BYTES
    store.lookup("ns", [2] * 4, 4)  # B is now the most recent
    store.insert("ns", [3] * 4, 4, kv(4))  # over budget by one block: A's tail goes first
    assert store.nbytes == 3 * BLOCK_BYTES
    assert len(store.lookup("ns", [1] * 8, 4)) == 1
    assert len(store.lookup("ns", [2] * 4, 4)) == 1
    assert len(store.lookup("ns", [3] * 4, 4)) == 1


def test_drop_namespace_frees_only_that_namespace() -> None:
    store = PrefixCache(max_bytes=1 << 20)
    store.insert("a", list(range(8)), 4, kv(8))
    store.insert("b", list(range(8)), 4, kv(8))
    store.drop_namespace("a")
    assert store.nbytes == 2 * BLOCK_BYTES
    assert store.lookup("a", list(range(8)), 4) == []
    assert len(store.lookup("b", list(range(8)), 4)) == 2


def test_span_store_is_keyed_by_namespace_and_bounded() -> None:
    one_span = sum(k.nbytes + v.nbytes for k, v in kv(4))
    store = SpanStore(max_bytes=2 * one_span)
    for token in range(3):
        store.put("ns", [token] * 4, kv(4))
    assert store.get("ns", [0] * 4) is None  # the least recently used went
    assert store.get("ns", [2] * 4) is not None
    assert store.get("other", [2] * 4) is None
    assert store.nbytes == 2 * one_span


# --- RoPE re-rotation on a tiny random Llama ---------------------------------------------------------

ROPES: dict[str, dict[str, Any] | None] = {
    "default": None,
    "yarn": {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 64,
        "rope_theta": 10000.0,
    },
}


@cache
def tiny_llama(rope: str) -> Any:
    torch.manual_seed(0)
    sizes: dict[str, Any] = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 100,
        "max_position_embeddings": 256,
    }
    if ROPES[rope] is not None:
        sizes["rope_parameters"] = ROPES[rope]
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**sizes)).eval()


def layers_at(model: Any, ids: torch.Tensor, first_position: int) -> list[Any]:
    cache_ = transformers.DynamicCache(config=model.config)
    with torch.inference_mode():
        forward_at(model, ids, cache_, first_position)
    return list(cache_.layers)


@pytest.mark.parametrize("rope", list(ROPES))
@pytest.mark.parametrize("delta", [1, 37, 150])
def test_keys_re_rotated_by_delta_equal_keys_computed_at_delta(rope: str, delta: int) -> None:
    model = tiny_llama(rope)
    ids = torch.randint(0, 100, (1, 12), generator=torch.Generator().manual_seed(delta))
    at_zero, at_delta = layers_at(model, ids, 0), layers_at(model, ids, delta)
    for zero, shifted in zip(at_zero, at_delta, strict=True):
        assert not torch.allclose(zero.keys, shifted.keys, atol=1e-3)  # positions really matter
        moved = rope_shift(zero.keys, delta, rotary_embedding(model))
        torch.testing.assert_close(moved, shifted.keys, atol=2e-5, rtol=1e-4)
        torch.testing.assert_close(zero.values, shifted.values, atol=2e-5, rtol=1e-4)


def test_models_without_composing_rope_are_refused() -> None:
    gpt2 = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50)
    )
    assert "rotary" in (rope_shift_refusal(gpt2) or "")
    assert rope_shift_refusal(tiny_llama("default")) is None
    dynamic = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            vocab_size=50,
            rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
        )
    )
    assert "dynamic" in (rope_shift_refusal(dynamic) or "")


# --- the embedded model --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cases(model_folder: Path) -> list[Case]:
    """Two short passkey cases: the same intro, different haystacks."""
    return list(passkey_cases(model_folder, (0.5,), 2, 0))


@pytest.fixture(scope="module")
def control(engine: Any, cases: list[Case]) -> list[Generation]:
    generations = run_arm(engine, Full("full"), cases)
    assert all(g.error is None and g.output_token_ids for g in generations)
    assert [g.n_cached_tokens for g in generations] == [0, 0]
    return generations


@pytest.mark.model
def test_prefix_reuse_is_token_identical_to_the_control(
    engine: Any, cases: list[Case], control: list[Generation]
) -> None:
    reused = run_arm(
        engine, Reuse("prefix-reuse", mode="prefix", block_size=16), [cases[0], cases[1], cases[0]]
    )
    assert all(g.error is None for g in reused)
    cached = [g.n_cached_tokens for g in reused]
    assert cached[0] == 0
    assert 0 < cached[1] < len(cases[1].prompt_token_ids or ()) - 16  # the shared chat header and intro
    assert cached[2] == (len(cases[0].prompt_token_ids or ()) - 1) // 16 * 16  # all but the last token
    expected = [control[0], control[1], control[0]]
    assert [g.output_token_ids for g in reused] == [g.output_token_ids for g in expected]


@pytest.mark.model
def test_span_reuse_places_a_context_at_another_offset(
    engine: Any, cases: list[Case], control: list[Generation]
) -> None:
    """The same context after a longer preamble is a hit; the miss path is exactly the control."""
    preamble = "You are a careful assistant. Read the whole text below twice, slowly, then answer briefly."
    longer = with_system_prompt(engine, cases[0], preamble)
    first, moved = context_span(engine.tokenizer, cases[0]), context_span(engine.tokenizer, longer)
    assert moved[0] > first[0]
    assert moved[1] - moved[0] == first[1] - first[0]
    span = run_arm(engine, Reuse("span-reuse", mode="span", block_size=16), [cases[0], longer])
    assert all(g.error is None for g in span)
    assert [g.n_cached_tokens for g in span] == [0, first[1] - first[0]]
    assert span[0].output_token_ids == control[0].output_token_ids


def with_system_prompt(engine: Any, case: Case, system: str) -> Case:
    from kvgate.workload.generators.passkey import QUESTION
    from kvgate.workload.hf_tokenizer import HFPromptTokenizer

    tok = HFPromptTokenizer.from_transformers(engine.tokenizer, "smollm2-135m")
    messages = ({"role": "system", "content": system}, *case.messages)
    ids = tok.encode_chat(messages)
    question_start = tok.question_start(messages, QUESTION)
    return dataclasses.replace(
        case,
        messages=messages,
        prompt_token_ids=tuple(ids),
        n_prompt_tokens=len(ids),
        question_start=question_start,
    )


@pytest.mark.model
def test_span_reuse_without_question_start_fails_the_case_clearly(engine: Any, cases: list[Case]) -> None:
    unknown = dataclasses.replace(cases[0], question_start=None)
    generation = run_arm(engine, Reuse("span-reuse", mode="span"), [unknown])[0]
    assert generation.error is not None and "question_start" in generation.error
