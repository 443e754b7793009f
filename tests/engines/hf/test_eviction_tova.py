"""TOVA scores: the last query's attention, by hand and by the naive loop; the last entry is kept."""

from __future__ import annotations

import pytest
import torch
from naive_attention import received

from kvgate.engines.hf.eviction.base import ScoringInputs, gather_kept, keep_indices, n_keep
from kvgate.engines.hf.eviction.tova import TOVA


def inputs(keys: torch.Tensor, queries: torch.Tensor) -> ScoringInputs:
    return ScoringInputs(keys=keys, values=keys * 2, queries=queries, layer=0)


def test_keeps_what_the_last_query_looks_at() -> None:
    keys = torch.zeros(1, 1, 6, 2)
    keys[0, 0, 1] = torch.tensor([0.0, 1.0])
    keys[0, 0, 3] = torch.tensor([1.0, 0.0])
    queries = torch.zeros(1, 1, 6, 2)
    queries[0, 0, 5] = torch.tensor([3.0, 2.0])  # logits 3/√2 on key 3, 2/√2 on key 1, 0 elsewhere
    queries[0, 0, 2] = torch.tensor([0.0, 50.0])  # earlier queries do not count
    data = inputs(keys, queries)
    scores = TOVA(ratio=0.5).scores(data)
    kept = keep_indices(scores, n_keep(6, 0.5))
    assert kept.tolist() == [[[1, 3, 5]]]
    assert torch.equal(gather_kept(data.values, kept), data.values[:, :, [1, 3, 5]])


def test_uniform_attention_by_hand() -> None:
    scores = TOVA(ratio=0.5).scores(inputs(torch.randn(1, 1, 4, 4), torch.zeros(1, 1, 4, 4)))
    assert torch.allclose(scores[0, 0, :3], torch.full((3,), 0.25))
    assert scores[0, 0, 3] > 0.25


def test_matches_naive_loop_with_gqa() -> None:
    torch.manual_seed(3)
    keys, queries = torch.randn(2, 2, 7, 8), torch.randn(2, 4, 7, 8) * 2
    scores = TOVA(ratio=0.25).scores(inputs(keys, queries))
    expected = received(queries, keys, [6], "mean")
    assert scores.shape == (2, 2, 7)
    assert torch.allclose(scores[..., :6].double(), expected[..., :6], atol=1e-6)
    assert (scores[..., 6] > scores[..., :6].amax(dim=-1)).all()


@pytest.mark.parametrize("ratio", [1.0, -0.5])
def test_bad_ratio(ratio: float) -> None:
    with pytest.raises(ValueError):
        TOVA(ratio=ratio)
