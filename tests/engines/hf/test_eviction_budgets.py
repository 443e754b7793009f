"""Per-head (AdaKV) and per-layer (PyramidKV) budgets: kvpress's published rules on cases worked by
hand, and the head mask that holds them in a dense cache against physically removed entries."""

from __future__ import annotations

import pytest
import torch

from kvgate.engines.hf.cache_hooks import EvictHook
from kvgate.engines.hf.eviction.adakv import AdaKV
from kvgate.engines.hf.eviction.budgets import adaptive_head_counts, pyramid_layer_budget, ranks
from kvgate.engines.hf.eviction.head_mask import HeadMask, head_mask
from kvgate.engines.hf.eviction.pyramidkv import PyramidKV
from kvgate.engines.hf.forward import forward_at


def test_pyramid_budgets_by_hand() -> None:
    """kvpress's rule, n = 1000, ratio 0.5, window 64, beta 20, 30 layers: capacity 64 + 500; low =
    500/20 = 25, high = 1000 − 25 = 975 ≥ n − window = 936, so high = 936 and low = 1000 − 936 = 64;
    step (936 − 64)/29: layer 0 keeps 936, layer 10 round(936 − 300.69) = 635, layer 29 keeps 64."""
    budgets = [pyramid_layer_budget(1000, 0.5, layer, 30, 64, 20) for layer in range(30)]
    assert (budgets[0], budgets[10], budgets[29]) == (936, 635, 64)
    assert budgets == sorted(budgets, reverse=True)
    assert abs(sum(budgets) - 30 * 500) <= 15  # the average is the uniform budget, to rounding


def test_pyramid_falls_back_to_uniform_where_no_pyramid_fits() -> None:
    """n = 100, ratio 0.5, window 64: high would be n − window = 36 < low = 64: every layer keeps 50."""
    assert {pyramid_layer_budget(100, 0.5, layer, 30, 64, 20) for layer in range(30)} == {50}
    with pytest.raises(ValueError, match="beta"):
        pyramid_layer_budget(100, 0.5, 0, 30, 64, 0.5)


def test_adaptive_counts_by_hand() -> None:
    """Two heads, k = 2 of 4: the layer keeps the top 4 of all 8 scores. Without the safeguard head 0
    takes all four (9, 8, 7, 6 beat 1…4); with safeguard 0.5 each head first keeps its best ⌊2·0.5⌋ = 1
    (9 and 4), then the best two left (8, 7) go to head 0: 3 and 1."""
    scores = torch.tensor([[[9.0, 8.0, 7.0, 6.0], [1.0, 2.0, 3.0, 4.0]]])
    assert adaptive_head_counts(scores, 2, 0.0).tolist() == [[4, 0]]
    assert adaptive_head_counts(scores, 2, 0.5).tolist() == [[3, 1]]
    assert adaptive_head_counts(scores, 2, 0.2).tolist() == [[4, 0]]  # ⌊2·0.2⌋ = 0: no floor


def test_ranks_break_ties_as_the_convention_does() -> None:
    scores = torch.tensor([[1.0, 3.0, 3.0, 2.0]])
    assert ranks(scores, "kvgate").tolist() == [[3, 1, 0, 2]]  # the later of tied scores first
    assert ranks(scores, "kvpress").tolist() == [[3, 0, 1, 2]]


def test_head_mask_by_hand() -> None:
    """Hkv = 2, Hq = 4 (query heads 0, 1 read key head 0); 2 queries over 4 positions, causal: query 0
    sees positions 0…2, query 1 all four; key head 1 hides position 0, which only heads 2, 3 lose."""

    class Module:
        class config:
            num_attention_heads = 4

    present = torch.tensor([[[True, True], [False, True]]])
    mask = head_mask(None, present, 2, 4, Module(), torch.float32)
    seen = (mask == 0)[0]
    assert seen.shape == (4, 2, 4)
    assert seen[0].tolist() == [[True, True, True, False], [True, True, True, True]]
    assert seen[0].tolist() == seen[1].tolist()
    assert seen[2].tolist() == [[False, True, True, False], [False, True, True, True]]
    given = torch.ones(1, 1, 2, 6, dtype=torch.bool)  # a longer given mask is cut to the 4 positions
    assert (head_mask(given, present, 2, 4, Module(), torch.float32) == 0)[0, 3, 1].tolist() == [False] + [
        True
    ] * 3


@pytest.fixture(scope="module")
def tiny_model() -> object:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def _logits_after(model: object, cache: object, first: int) -> list[torch.Tensor]:
    """The question (3 tokens, q > 1: causal inside it) then two decode steps, at true positions."""
    question = torch.tensor([[5, 6, 7]])
    out = [forward_at(model, question, cache, first)]
    for step, token in enumerate((8, 9)):
        out.append(forward_at(model, torch.tensor([[token]]), cache, first + 3 + step))
    return out


@torch.inference_mode()
def test_hidden_entries_read_as_removed_ones(tiny_model: object) -> None:
    """Hiding positions in every head (the mask) gives the logits of a cache they were removed from."""
    from transformers import DynamicCache

    from kvgate.engines.hf.capture import attention_modules

    ids = torch.randint(0, 64, (1, 12), generator=torch.Generator().manual_seed(3))
    keep = [0, 1, 4, 5, 9, 10, 11]
    removed, masked = DynamicCache(config=tiny_model.config), DynamicCache(config=tiny_model.config)
    forward_at(tiny_model, ids, removed, 0)
    forward_at(tiny_model, ids, masked, 0)
    index = torch.tensor(keep)
    for layer in removed.layers:
        layer.keys, layer.values = layer.keys[:, :, index], layer.values[:, :, index]
    hidden = HeadMask()
    present = torch.zeros(1, 2, 12, dtype=torch.bool)
    present[:, :, index] = True
    hidden.present = {layer: present for layer in range(2)}
    hidden.install(attention_modules(tiny_model))
    try:
        with_mask = _logits_after(tiny_model, masked, 12)
    finally:
        hidden.remove()
    for a, b in zip(_logits_after(tiny_model, removed, 12), with_mask, strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def _random_cache(layers: int, n: int) -> object:
    from transformers import DynamicCache

    cache = DynamicCache()
    generator = torch.Generator().manual_seed(4)
    for index in range(layers):
        keys = torch.randn(1, 2, n, 8, generator=generator)
        cache.update(keys, torch.randn(1, 2, n, 8, generator=generator), index)
    return cache


def test_pyramid_hook_keeps_each_layers_budget() -> None:
    """n = 40, ratio 0.5, window 4, beta 4: low = 20/4 = 5, high = 40 − 5 = 35 (< n − window = 36), step
    10: 35, 25, 15, 5. Every layer holds the most any keeps (layer 0's 35); each layer's heads have its
    own budget present, 15 absent per head on average."""
    pytest.importorskip("transformers")
    method = PyramidKV(ratio=0.5, window=4, beta=4)
    cache = _random_cache(4, 40)
    queries = {i: torch.randn(1, 4, 4, 8, generator=torch.Generator().manual_seed(i)) for i in range(4)}
    hook = EvictHook(method, head_mask=HeadMask())
    hook.after_prefill(cache, queries)
    budgets = [pyramid_layer_budget(40, 0.5, layer, 4, 4, 4) for layer in range(4)]
    assert budgets == [35, 25, 15, 5] and sum(budgets) == 4 * 20
    assert {int(layer.keys.shape[2]) for layer in cache.layers} == {35}
    assert [hook.head_mask.present[i].sum(-1).tolist() for i in range(4)] == [[[b, b]] for b in budgets]
    assert hook.head_mask.absent() == 35 - 20


def test_adakv_hook_shares_the_layers_budget_among_heads() -> None:
    pytest.importorskip("transformers")
    method = AdaKV(ratio=0.5, window=4)
    cache = _random_cache(2, 40)
    queries = {i: torch.randn(1, 4, 4, 8, generator=torch.Generator().manual_seed(i)) for i in range(2)}
    hook = EvictHook(method, head_mask=HeadMask())
    hook.after_prefill(cache, queries)
    for index in range(2):
        counts = hook.head_mask.present[index].sum(-1)
        assert int(counts.sum()) == 2 * 20 and int(counts.min()) >= int(20 * 0.2)
        assert int(cache.layers[index].keys.shape[2]) == int(
            max(p.sum(-1).max() for p in hook.head_mask.present.values())
        )
