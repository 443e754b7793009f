"""make_method: every spec method name maps to its registered dataclass with the spec's fields."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kvgate.engines.hf.eviction.adakv import AdaKV
from kvgate.engines.hf.eviction.base import ScoringInputs
from kvgate.engines.hf.eviction.h2o import H2O
from kvgate.engines.hf.eviction.knorm import KNorm
from kvgate.engines.hf.eviction.methods import make_method, method_class
from kvgate.engines.hf.eviction.pyramidkv import PyramidKV
from kvgate.engines.hf.eviction.random_ import RandomEviction
from kvgate.engines.hf.eviction.snapkv import SnapKV
from kvgate.engines.hf.eviction.streaming import StreamingLLM
from kvgate.engines.hf.eviction.tova import TOVA
from kvgate.treatments.eviction_methods import EVICTION_METHODS
from kvgate.treatments.spec import EVICTION_METHOD_NAMES, Eviction

EXPECTED = {
    "streaming": StreamingLLM(0.25, sink_tokens=2),
    "snapkv": SnapKV(0.25, window=8),
    "h2o": H2O(0.25, recent=8),
    "knorm": KNorm(0.25),
    "tova": TOVA(0.25),
    "adakv": AdaKV(0.25, window=8),
    "pyramidkv": PyramidKV(0.25, window=8),
    "random": RandomEviction(0.25, seed=5),
}


def test_every_spec_name_is_registered() -> None:
    assert set(EVICTION_METHODS) == set(EVICTION_METHOD_NAMES) == set(EXPECTED)


@pytest.mark.parametrize("name", EVICTION_METHOD_NAMES)
def test_make_method_maps_the_spec(name: str) -> None:
    method = make_method(Eviction("arm", method=name, ratio=0.25, sink_tokens=2, window=8, seed=5))
    assert method == EXPECTED[name]
    assert isinstance(method, method_class(name))
    assert dataclasses.is_dataclass(method)
    with pytest.raises(dataclasses.FrozenInstanceError):
        method.ratio = 0.5  # type: ignore[misc]


@pytest.mark.parametrize("name", EVICTION_METHOD_NAMES)
def test_every_method_scores_a_layer(name: str) -> None:
    torch.manual_seed(0)
    keys = torch.randn(1, 2, 40, 8)
    data = ScoringInputs(keys=keys, values=keys, queries=torch.randn(1, 4, 40, 8), layer=1)
    scores = make_method(Eviction("arm", method=name)).scores(data)
    assert scores.shape == (1, 2, 40)
    assert torch.isfinite(scores).all()
