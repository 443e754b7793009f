"""H2O scores: cumulative causal attention by hand and by the naive loop, chunk invariance."""

from __future__ import annotations

import pytest
import torch
from naive_attention import received

from kvgate.engines.hf.eviction.base import ScoringInputs, gather_kept, keep_indices, n_keep
from kvgate.engines.hf.eviction.h2o import H2O


def inputs(keys: torch.Tensor, queries: torch.Tensor) -> ScoringInputs:
    return ScoringInputs(keys=keys, values=-keys, queries=queries, layer=3)


def test_uniform_attention_by_hand() -> None:
    # Zero queries attend uniformly, so key j receives Σ_{p ≥ j} 1/(p + 1):
    # key 0: 1 + 1/2 + 1/3 + 1/4 = 25/12, key 1: 13/12, key 2: 7/12; key 3 is the protected recent one.
    keys = torch.randn(1, 1, 4, 4)
    data = inputs(keys, torch.zeros(1, 1, 4, 4))
    scores = H2O(ratio=0.5, recent=1).scores(data)
    assert torch.allclose(scores[0, 0, :3], torch.tensor([25 / 12, 13 / 12, 7 / 12]))
    kept = keep_indices(scores, n_keep(4, 0.5))
    assert kept.tolist() == [[[0, 3]]]
    assert torch.equal(gather_kept(data.keys, kept), keys[:, :, [0, 3]])
    assert torch.equal(gather_kept(data.values, kept), -keys[:, :, [0, 3]])


def test_heavy_hitter_in_the_middle() -> None:
    # Every query from position 3 on looks at key 2; key 2 beats the early keys, recent 1 keeps key 6.
    keys = torch.zeros(1, 1, 7, 2)
    keys[0, 0, 2] = torch.tensor([1.0, 0.0])
    queries = torch.zeros(1, 1, 7, 2)
    queries[0, 0, 3:] = torch.tensor([40.0, 0.0])
    scores = H2O(ratio=5 / 7, recent=1).scores(inputs(keys, queries))
    assert keep_indices(scores, n_keep(7, 5 / 7)).tolist() == [[[2, 6]]]


@pytest.mark.parametrize("chunk", [1, 3, 256])
def test_matches_naive_loop_with_gqa_for_any_chunk(chunk: int) -> None:
    torch.manual_seed(1)
    keys, queries = torch.randn(2, 2, 9, 8), torch.randn(2, 6, 9, 8) * 2
    scores = H2O(ratio=0.5, recent=2, chunk=chunk).scores(inputs(keys, queries))
    expected = received(queries, keys, list(range(9)), "sum")
    assert scores.shape == (2, 2, 9)
    assert torch.allclose(scores[..., :7].double(), expected[..., :7], atol=1e-5)
    assert (scores[..., 7:] > scores[..., :7].amax(dim=-1, keepdim=True)).all()


def test_recent_zero_protects_nothing() -> None:
    torch.manual_seed(2)
    keys, queries = torch.randn(1, 1, 5, 4), torch.randn(1, 1, 5, 4)
    scores = H2O(ratio=0.5, recent=0).scores(inputs(keys, queries))
    assert torch.allclose(scores.double(), received(queries, keys, list(range(5)), "sum"), atol=1e-5)


def test_needs_the_queries_of_every_position() -> None:
    with pytest.raises(ValueError, match="queries of all"):
        H2O().scores(inputs(torch.randn(1, 1, 5, 4), torch.randn(1, 1, 2, 4)))


@pytest.mark.parametrize("kwargs", [{"ratio": 1.5}, {"recent": -1}, {"chunk": 0}])
def test_bad_hyper_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        H2O(**kwargs)  # type: ignore[arg-type]
