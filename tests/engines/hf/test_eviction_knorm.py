"""Knorm scores: the smallest-norm keys are kept, at their original positions."""

from __future__ import annotations

import pytest
import torch

from kvgate.engines.hf.eviction.base import ScoringInputs, gather_kept, keep_indices, n_keep
from kvgate.engines.hf.eviction.knorm import KNorm


def test_keeps_the_smallest_norms() -> None:
    # Norms per head: head 0 → 5, 1, 4, 2 (keep 1, 3); head 1 → 0, 3, 1, 9 (keep 0, 2).
    keys = torch.tensor(
        [
            [
                [[3.0, 4.0], [1.0, 0.0], [0.0, 4.0], [0.0, 2.0]],
                [[0.0, 0.0], [3.0, 0.0], [0.0, -1.0], [9.0, 0.0]],
            ]
        ]
    )
    data = ScoringInputs(keys=keys, values=keys + 1, queries=keys[:, :0], layer=0)
    scores = KNorm(ratio=0.5).scores(data)
    assert torch.allclose(scores, -torch.tensor([[[5.0, 1.0, 4.0, 2.0], [0.0, 3.0, 1.0, 9.0]]]))
    kept = keep_indices(scores, n_keep(4, 0.5))
    assert kept.tolist() == [[[1, 3], [0, 2]]]
    assert torch.equal(gather_kept(data.values, kept)[0, 0], keys[0, 0, [1, 3]] + 1)
    assert torch.equal(gather_kept(data.keys, kept)[0, 1], keys[0, 1, [0, 2]])


def test_bad_ratio() -> None:
    with pytest.raises(ValueError):
        KNorm(ratio=1.0)
