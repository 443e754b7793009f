"""Random eviction: reproducible by (seed, layer), different across seeds and layers."""

from __future__ import annotations

import pytest
import torch

from kvgate.engines.hf.eviction.base import ScoringInputs, keep_indices
from kvgate.engines.hf.eviction.random_ import RandomEviction


def inputs(layer: int) -> ScoringInputs:
    keys = torch.zeros(2, 3, 50, 4)
    return ScoringInputs(keys=keys, values=keys, queries=keys[:, :, :0], layer=layer)


def test_same_seed_and_layer_same_scores() -> None:
    first = RandomEviction(ratio=0.5, seed=7).scores(inputs(2))
    assert first.shape == (2, 3, 50)
    assert torch.equal(first, RandomEviction(ratio=0.5, seed=7).scores(inputs(2)))
    torch.manual_seed(123)  # the global generator plays no part
    assert torch.equal(first, RandomEviction(ratio=0.5, seed=7).scores(inputs(2)))


def test_differs_across_seeds_layers_and_heads() -> None:
    base = RandomEviction(seed=0).scores(inputs(0))
    assert not torch.equal(keep_indices(base, 25), keep_indices(RandomEviction(seed=1).scores(inputs(0)), 25))
    assert not torch.equal(base, RandomEviction(seed=0).scores(inputs(1)))
    assert not torch.equal(RandomEviction(seed=1).scores(inputs(0)), RandomEviction(seed=0).scores(inputs(1)))
    assert not torch.equal(base[0, 0], base[0, 1])


@pytest.mark.parametrize("kwargs", [{"seed": -1}, {"ratio": 1.0}])
def test_bad_hyper_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RandomEviction(**kwargs)  # type: ignore[arg-type]
