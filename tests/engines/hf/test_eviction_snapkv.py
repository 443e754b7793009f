"""SnapKV scores: hand-computed cases, the naive loop, GQA grouping, the protected window."""

from __future__ import annotations

import pytest
import torch
from naive_attention import pool, received

from kvgate.engines.hf.eviction.base import ScoringInputs, gather_kept, keep_indices, n_keep
from kvgate.engines.hf.eviction.snapkv import SnapKV
from kvgate.engines.hf.eviction.tova import TOVA


def inputs(keys: torch.Tensor, queries: torch.Tensor) -> ScoringInputs:
    return ScoringInputs(keys=keys, values=keys.clone() + 100, queries=queries, layer=0)


def test_keeps_what_the_window_looks_at_and_the_window() -> None:
    keys = torch.zeros(1, 1, 8, 2)
    keys[0, 0, 1] = torch.tensor([1.0, 0.0])
    keys[0, 0, 4] = torch.tensor([0.0, 1.0])
    queries = torch.zeros(1, 1, 8, 2)
    queries[0, 0, 6] = torch.tensor([30.0, 0.0])  # position 6 looks at key 1
    queries[0, 0, 7] = torch.tensor([0.0, 30.0])  # position 7 looks at key 4
    data = inputs(keys, queries)
    scores = SnapKV(ratio=0.5, window=2, kernel_size=1).scores(data)
    kept = keep_indices(scores, n_keep(8, 0.5))
    assert kept.tolist() == [[[1, 4, 6, 7]]]
    assert torch.equal(gather_kept(data.keys, kept), keys[:, :, [1, 4, 6, 7]])
    assert torch.equal(gather_kept(data.values, kept), data.values[:, :, [1, 4, 6, 7]])


@pytest.mark.parametrize(
    ("kernel", "pooling", "expected"), [(1, "avg", 7 / 24), (3, "avg", 7 / 36), (3, "max", 7 / 24)]
)
def test_uniform_attention_by_hand(kernel: int, pooling: str, expected: float) -> None:
    # Zero queries attend uniformly: position 2 gives 1/3 to keys 0..2, position 3 gives 1/4 to keys 0..3,
    # so prefix keys 0 and 1 average (1/3 + 1/4) / 2 = 7/24; avg pooling over 3 with zero padding: 14/72.
    keys = torch.randn(1, 1, 4, 4)
    scores = SnapKV(ratio=0.5, window=2, kernel_size=kernel, pooling=pooling).scores(
        inputs(keys, torch.zeros(1, 1, 4, 4))
    )
    assert torch.allclose(scores[0, 0, :2], torch.tensor([expected, expected]))
    assert (scores[0, 0, 2:] > scores[0, 0, :2].max()).all()


@pytest.mark.parametrize("pooling", ["avg", "max"])
def test_matches_naive_loop_with_gqa(pooling: str) -> None:
    torch.manual_seed(0)
    keys, queries = torch.randn(2, 2, 10, 8), torch.randn(2, 4, 10, 8) * 2
    window, kernel = 3, 3
    scores = SnapKV(ratio=0.5, window=window, kernel_size=kernel, pooling=pooling).scores(
        inputs(keys, queries)
    )
    assert scores.shape == (2, 2, 10)
    mean = received(queries, keys, list(range(10 - window, 10)), "mean")
    for b in range(2):
        for h in range(2):
            expected = pool(mean[b, h, : 10 - window].tolist(), kernel, pooling)
            assert torch.allclose(
                scores[b, h, : 10 - window].double(), torch.tensor(expected, dtype=torch.float64), atol=1e-6
            )
    assert (scores[..., -window:] > scores[..., :-window].amax(dim=-1, keepdim=True)).all()


def test_query_heads_map_to_their_key_head() -> None:
    # Query heads 0, 1 read key head 0; heads 2, 3 read key head 1. Only head 3 looks at key 2.
    keys = torch.zeros(1, 2, 6, 2)
    keys[0, 1, 2] = torch.tensor([1.0, 0.0])
    queries = torch.zeros(1, 4, 6, 2)
    queries[0, 3, 5] = torch.tensor([40.0, 0.0])
    scores = SnapKV(ratio=0.5, window=1, kernel_size=1).scores(inputs(keys, queries))
    assert int(scores[0, 1, :5].argmax()) == 2
    assert torch.allclose(scores[0, 0, :5], torch.full((5,), 1 / 6))


def test_short_prompt_keeps_the_most_recent() -> None:
    keys, queries = torch.randn(1, 1, 6, 4), torch.randn(1, 1, 6, 4)
    scores = SnapKV(ratio=0.5).scores(inputs(keys, queries))
    assert keep_indices(scores, 3).tolist() == [[[3, 4, 5]]]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ratio": 1.0},
        {"ratio": -0.1},
        {"window": 0},
        {"kernel_size": 4},
        {"kernel_size": 0},
        {"pooling": "min"},
    ],
)
def test_bad_hyper_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SnapKV(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("method", [SnapKV(ratio=0.5, window=3), TOVA(ratio=0.5)], ids=["snapkv", "tova"])
def test_the_window_queries_alone_score_as_all_queries(method: SnapKV | TOVA) -> None:
    """Capturing only the last `query_window` queries (what the engine does) changes no score."""
    torch.manual_seed(1)
    keys, queries = torch.randn(2, 2, 12, 8), torch.randn(2, 4, 12, 8)
    every = method.scores(inputs(keys, queries))
    window = method.scores(inputs(keys, queries[:, :, -method.query_window :]))
    assert torch.equal(window, every)
    with pytest.raises(ValueError, match="needs the queries"):
        SnapKV(ratio=0.5, window=3).scores(inputs(keys, queries[:, :, -2:]))


def test_the_engine_captures_the_most_any_part_reads() -> None:
    from kvgate.engines.hf.cache_hooks import query_window
    from kvgate.treatments.spec import Composite, Eviction, Quantize

    snapkv = Eviction("s", method="snapkv", window=16)
    assert query_window(snapkv) == 16
    assert query_window(snapkv, certificate_window=32) == 32
    assert query_window(Eviction("t", method="tova")) == 1
    assert query_window(Composite("c", of=(snapkv, Quantize("q")))) == 16
    assert query_window(Eviction("h", method="h2o")) is None  # H2O sums over every query
