"""capture_queries: the captured queries times the cached keys reproduce the model's own attention."""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import pytest
import torch

from kvgate.engines.hf.capture import capture_queries

transformers = pytest.importorskip("transformers")

SIZES = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 100,
    "max_position_embeddings": 64,
}


@cache  # built once per family; the tests only read the model
def tiny(family: str) -> Any:
    torch.manual_seed(0)
    if family == "llama":
        config = transformers.LlamaConfig(**SIZES)
        model = transformers.LlamaForCausalLM(config)
    else:  # Qwen3: per-head q_norm and k_norm before RoPE
        config = transformers.Qwen3Config(**SIZES, head_dim=16)
        model = transformers.Qwen3ForCausalLM(config)
    config._attn_implementation = "eager"
    return model.eval()


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_queries_times_cached_keys_give_the_attention_weights(family: str) -> None:
    model = tiny(family)
    ids = torch.tensor([[5, 17, 3, 99, 42, 8, 8, 61, 2, 30, 11]])
    cache = transformers.DynamicCache(config=model.config)
    with torch.no_grad(), capture_queries(model) as queries:
        out = model(input_ids=ids, past_key_values=cache, use_cache=True, output_attentions=True)
    assert sorted(queries) == [0, 1]
    n = ids.shape[1]
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    for layer in range(2):
        q, keys = queries[layer], cache.layers[layer].keys
        assert q.shape == (1, 4, n, keys.shape[-1])
        keys = keys.repeat_interleave(2, dim=1)  # query head h reads key head h // 2
        logits = (q @ keys.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(mask, float("-inf"))
        assert torch.allclose(torch.softmax(logits, dim=-1), out.attentions[layer], atol=1e-5)


def test_hooks_removed_and_outputs_unchanged() -> None:
    model = tiny("llama")
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        plain = model(input_ids=ids).logits
        with capture_queries(model) as queries:
            hooked = model(input_ids=ids).logits
        model(input_ids=ids)
    assert torch.equal(plain, hooked)
    assert queries[0].shape[2] == 4  # the forward after exit recorded nothing
    assert all(not layer.self_attn._forward_pre_hooks for layer in model.model.layers)


def test_a_second_forward_appends_positions() -> None:
    model = tiny("llama")
    cache = transformers.DynamicCache(config=model.config)
    with torch.no_grad(), capture_queries(model) as queries:
        model(input_ids=torch.tensor([[1, 2, 3]]), past_key_values=cache, use_cache=True)
        model(input_ids=torch.tensor([[4, 5]]), past_key_values=cache, use_cache=True)
    with torch.no_grad(), capture_queries(model) as whole:
        model(input_ids=torch.tensor([[1, 2, 3, 4, 5]]))
    assert torch.allclose(queries[1], whole[1], atol=1e-5)


def test_refuses_a_model_without_llama_attention() -> None:
    with pytest.raises(ValueError, match="Llama-family"), capture_queries(torch.nn.Linear(2, 2)):
        pass
