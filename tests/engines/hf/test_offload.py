"""Offload on the hf engine: per-block checksums, exact round trips through the host and disk tiers, planted
corruption caught, and on the model every greedy output token-identical to the control."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from hf_engine_support import passkey_cases, run_arm

from kvgate.engines.hf.block_checksums import BlockId, block_checksums, first_mismatch
from kvgate.engines.hf.offload import DiskTier, HostTier, OffloadCorrupted, Tier, round_trip
from kvgate.treatments.spec import Full, Offload
from kvgate.workload.case import Case

transformers = pytest.importorskip("transformers")


def random_layers(
    n: int, layers: int = 3, dtype: torch.dtype = torch.float32
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer (keys, values) [1, 2, n, 8]."""
    g = torch.Generator().manual_seed(n)
    return [
        (torch.randn(1, 2, n, 8, generator=g).to(dtype), torch.randn(1, 2, n, 8, generator=g).to(dtype))
        for _ in range(layers)
    ]


class FakeCache:
    """What round_trip touches of a DynamicCache: `layers`, each with `keys` and `values`."""

    def __init__(self, pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.layers = [type("Layer", (), {"keys": k, "values": v})() for k, v in pairs]


# --- checksums ---------------------------------------------------------------------------------------


def test_one_checksum_per_block_of_each_layer_and_tensor() -> None:
    sums = block_checksums(random_layers(10), block_size=4)
    assert len(sums) == 3 * 2 * 3  # layers × (keys, values) × blocks [0,4) [4,8) [8,10)
    assert BlockId(2, "values", 8, 10) in sums


def test_a_changed_value_is_named_by_its_block() -> None:
    layers = random_layers(10)
    before = block_checksums(layers, 4)
    layers[1][0][0, 1, 5, 3] += 1e-6
    assert first_mismatch(before, block_checksums(layers, 4)) == BlockId(1, "keys", 4, 8)
    assert first_mismatch(before, before) is None


def test_a_change_of_dtype_or_length_is_a_mismatch() -> None:
    layers = random_layers(8)
    before = block_checksums(layers, 4)
    as_half = [(k.half().float(), v) for k, v in layers]
    assert first_mismatch(before, block_checksums(as_half, 4)) is not None
    shorter = [(k[:, :, :7], v[:, :, :7]) for k, v in layers]
    assert first_mismatch(before, block_checksums(shorter, 4)) == BlockId(0, "keys", 4, 7)


# --- tiers --------------------------------------------------------------------------------------------


def tiers(tmp_path: Path) -> list[Tier]:
    return [HostTier(), DiskTier(tmp_path)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_round_trip_gives_back_the_same_bytes_and_drops_the_originals(
    tmp_path: Path, dtype: torch.dtype
) -> None:
    for tier in tiers(tmp_path):
        original = random_layers(21, dtype=dtype)
        cache = FakeCache([(k.clone(), v.clone()) for k, v in original])
        sent = [(layer.keys, layer.values) for layer in cache.layers]
        round_trip(cache, tier, block_size=4)
        for layer, (k, v), (old_k, _) in zip(cache.layers, original, sent, strict=True):
            assert torch.equal(layer.keys, k) and torch.equal(layer.values, v)
            assert layer.keys.dtype == dtype
            assert layer.keys.data_ptr() != old_k.data_ptr()  # a copy came back, not the tensor sent
        assert list(tmp_path.iterdir()) == []  # the disk tier removed its file


def test_the_disk_tier_keeps_nothing_in_memory(tmp_path: Path) -> None:
    tier = DiskTier(tmp_path)
    tier.store(random_layers(16))
    assert not any(isinstance(v, torch.Tensor) for v in vars(tier).values())
    assert sum(f.stat().st_size for f in tmp_path.iterdir()) == 3 * 2 * 2 * 16 * 8 * 4


@pytest.mark.parametrize("tier_name", ["host", "disk"])
def test_planted_corruption_is_caught_and_named(tmp_path: Path, tier_name: str) -> None:
    tier = HostTier() if tier_name == "host" else DiskTier(tmp_path)
    cache = FakeCache(random_layers(12))
    with pytest.raises(OffloadCorrupted, match=rf"{tier_name} tier: block at layer 0 keys, positions 0–3"):
        round_trip(cache, tier, block_size=4, plant_corruption=True)


# --- the embedded model --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cases(model_folder: Path) -> list[Case]:
    return list(passkey_cases(model_folder, (0.3, 0.7), 1, 1))


@pytest.mark.model
def test_offload_is_token_identical_to_the_control(engine: Any, cases: list[Case]) -> None:
    control = run_arm(engine, Full("full"), cases)
    assert all(g.error is None and g.output_token_ids for g in control)
    for tier in ("host", "disk"):
        offloaded = run_arm(engine, Offload(f"offload-{tier}", tier=tier, block_size=16), cases)
        assert [g.error for g in offloaded] == [None, None]
        assert [g.output_token_ids for g in offloaded] == [g.output_token_ids for g in control]
        assert [g.n_cached_tokens for g in offloaded] == [0, 0]


@pytest.mark.model
def test_a_corrupted_offload_fails_the_case_as_an_engine_error(engine: Any, cases: list[Case]) -> None:
    from kvgate.engines.hf.engine import CORRUPT_OFFLOAD_FAULT

    faults = {CORRUPT_OFFLOAD_FAULT: True}
    generations = run_arm(engine, Offload("offload-disk", tier="disk"), cases[:1], faults=faults)
    assert generations[0].error is not None
    assert "checksum mismatch" in generations[0].error
    assert generations[0].output_token_ids == ()
