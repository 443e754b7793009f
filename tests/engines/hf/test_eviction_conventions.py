"""The kvpress convention: kept counts truncated, ties to earlier positions; kvgate's own rounds and
keeps later positions. The catalog names kvpress's defaults; the default convention leaves specs as
they were."""

from __future__ import annotations

import pytest
import torch

from kvgate.engines.hf.cache_hooks import EvictHook, build_hooks
from kvgate.engines.hf.eviction.base import keep_indices, n_keep
from kvgate.errors import BadInput
from kvgate.treatments.matrix import catalog_tables, parse_treatment
from kvgate.treatments.spec import Eviction


@pytest.mark.parametrize(("n", "ratio", "ours", "kvpress"), [(5, 0.5, 3, 2), (7, 0.3, 5, 4), (10, 0.5, 5, 5)])
def test_kept_counts(n: int, ratio: float, ours: int, kvpress: int) -> None:
    assert n_keep(n, ratio) == ours and n_keep(n, ratio, "kvpress") == kvpress
    assert n_keep(1, 0.9, "kvpress") == 1  # at least one entry is always kept


def test_ties_go_to_later_or_earlier_positions() -> None:
    scores = torch.tensor([[[1.0, 2.0, 2.0, 0.0, 2.0, 2.0]]])
    assert keep_indices(scores, 3).tolist() == [[[2, 4, 5]]]
    assert keep_indices(scores, 3, "kvpress").tolist() == [[[1, 2, 4]]]
    assert (
        keep_indices(scores, 5, "kvpress").tolist() == keep_indices(scores, 5).tolist() == [[[0, 1, 2, 4, 5]]]
    )


def test_the_hook_applies_the_treatment_convention() -> None:
    (hook,) = build_hooks(Eviction("k", method="knorm", convention="kvpress"))
    assert isinstance(hook, EvictHook) and hook.convention == "kvpress"
    (ours,) = build_hooks(Eviction("k", method="knorm"))
    assert isinstance(ours, EvictHook) and ours.convention == "kvgate"


def test_catalog_kvpress_defaults_and_stable_default_specs() -> None:
    tables = catalog_tables()
    snapkv = parse_treatment("snapkv-50-kvpress", tables, "catalog")
    assert isinstance(snapkv, Eviction)
    assert (snapkv.window, snapkv.scope, snapkv.convention) == (64, "context", "kvpress")
    assert snapkv.to_dict()["convention"] == "kvpress"
    for name in ("streaming-50-kvpress", "knorm-50-kvpress", "streaming-50-context", "knorm-50-context"):
        t = parse_treatment(name, tables, "catalog")
        assert isinstance(t, Eviction) and t.scope == "context"
    default = parse_treatment("snapkv-50", tables, "catalog")
    assert "convention" not in default.to_dict()  # fingerprints of runs made before the field stay valid
    with pytest.raises(BadInput, match="convention must be one of kvgate, kvpress"):
        parse_treatment("x", {"x": {"kind": "eviction", "convention": "vllm"}}, "test")
