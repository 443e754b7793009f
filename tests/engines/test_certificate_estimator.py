"""The certificate's estimator on synthetic attention: exact with the whole dropped set, unbiased totals
under Poisson sampling, a bound that covers at its confidence, and inclusion probabilities as stated."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from kvgate.engines.hf.certificate.estimator import certify_step, exact_error, multipliers
from kvgate.engines.hf.certificate.sampling import (
    DroppedSample,
    draw_sample,
    dropped_indices,
    expected_size,
    inclusion_probabilities,
)

B, HKV, G, R, DROP, DIM = 1, 2, 3, 24, 40, 8
SCALE = 1 / math.sqrt(DIM)


def attention_case(seed: int, heavy: float = 1.0, sharpness: float = 2.0) -> dict[str, torch.Tensor]:
    """Queries, retained and dropped keys and values; a few dropped keys aligned with the queries, so the
    tail is heavy-tailed (as attention is)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, HKV, G, DIM, generator=g) * sharpness
    keys = torch.randn(B, HKV, R, DIM, generator=g)
    values = torch.randn(B, HKV, R, DIM, generator=g)
    dropped_keys = torch.randn(B, HKV, DROP, DIM, generator=g)
    dropped_keys[:, :, :3] += heavy * q.mean(dim=2, keepdim=True)
    dropped_values = torch.randn(B, HKV, DROP, DIM, generator=g) + 1.0
    out = torch.matmul(torch.softmax(torch.matmul(q, keys.transpose(-1, -2)) * SCALE, dim=-1), values)
    return {"q": q, "keys": keys, "values": values, "dk": dropped_keys, "dv": dropped_values, "out": out}


def full_sample(c: dict[str, torch.Tensor]) -> DroppedSample:
    return DroppedSample(
        c["dk"], c["dv"], torch.ones(B, HKV, DROP), torch.ones(B, HKV, DROP, dtype=torch.bool),
        c["dv"].norm(dim=-1).amax(dim=-1),
    )  # fmt: skip


def sample_of(c: dict[str, torch.Tensor], inclusion: torch.Tensor, seed: int) -> DroppedSample:
    """Poisson sample of the dropped entries (stored after the retained ones in one span)."""
    keys = torch.cat([c["keys"], c["dk"]], dim=2)
    values = torch.cat([c["values"], c["dv"]], dim=2)
    dropped = torch.arange(R, R + DROP).expand(B, HKV, DROP)
    return draw_sample(keys, values, dropped, inclusion, (seed,))


def test_with_the_whole_dropped_set_the_estimate_is_the_exact_error() -> None:
    c = attention_case(0)
    step = certify_step(c["q"], c["out"], c["keys"], full_sample(c), SCALE, 0.95)
    true = exact_error(c["q"], c["keys"], c["values"], c["dk"], c["dv"], SCALE)
    assert torch.allclose(step.estimate.double(), true, rtol=1e-4, atol=1e-6)
    assert torch.allclose(step.bound, step.estimate)  # π = 1: no sampling variance
    assert float(true.min()) > 0


def test_horvitz_thompson_totals_are_unbiased_and_the_bound_covers() -> None:
    c = attention_case(1)
    true = exact_error(c["q"], c["keys"], c["values"], c["dk"], c["dv"], SCALE)
    inclusion = torch.full((B, HKV, DROP), 0.25)
    draws, covered, estimates = 400, 0, []
    for seed in range(draws):
        step = certify_step(c["q"], c["out"], c["keys"], sample_of(c, inclusion, seed), SCALE, 0.95)
        covered += int((true <= step.bound.double()).sum())
        estimates.append(step.estimate)
    coverage = covered / (draws * true.numel())
    assert coverage >= 0.95, coverage
    # The ratio estimate is consistent, not unbiased: its mean lands near the truth.
    assert torch.allclose(torch.stack(estimates).mean(dim=0).double(), true, rtol=0.25)


def test_the_corrected_estimate_removes_the_sampling_noise_from_the_square() -> None:
    """ê² overstates e² by the noise of δ̂ = Û / (1 + Ẑ); ẽ² subtracts its linearised variance."""
    c = attention_case(1, heavy=0.0, sharpness=0.5)
    true = exact_error(c["q"], c["keys"], c["values"], c["dk"], c["dv"], SCALE)
    inclusion = torch.full((B, HKV, DROP), 0.2)
    raw, corrected = [], []
    for seed in range(400):
        step = certify_step(c["q"], c["out"], c["keys"], sample_of(c, inclusion, seed), SCALE, 0.95)
        raw.append(step.estimate.double())
        corrected.append(step.corrected.double())
    raw_square = torch.stack(raw).square().mean(dim=0) / true.square()
    corrected_square = torch.stack(corrected).square().mean(dim=0) / true.square()
    assert bool((raw_square > 1.03).all()), raw_square
    assert bool(((corrected_square - 1).abs() < (raw_square - 1).abs()).all()), corrected_square
    assert bool((torch.stack(corrected) <= torch.stack(raw) + 1e-6).all())
    full = certify_step(c["q"], c["out"], c["keys"], full_sample(c), SCALE, 0.95)
    assert torch.allclose(full.corrected, full.estimate)  # π = 1: no noise to remove


def test_cells_report_the_output_norm_and_where_the_cap_binds() -> None:
    c = attention_case(0)
    sample = sample_of(c, torch.full((B, HKV, DROP), 0.05), 3)
    step = certify_step(c["q"], c["out"], c["keys"], sample, SCALE, 0.95)
    assert torch.allclose(step.output_norm, c["out"].norm(dim=-1))
    cap = sample.value_radius.unsqueeze(-1) + step.output_norm
    assert torch.equal(step.capped, torch.isclose(step.bound, cap) & step.capped)
    tight = dataclasses.replace(sample, value_radius=torch.zeros_like(sample.value_radius))
    capped = certify_step(c["q"], c["out"], c["keys"], tight, SCALE, 0.95)
    assert bool(capped.capped.all()) and torch.allclose(capped.bound, capped.output_norm)


def test_the_bound_shrinks_with_a_larger_sample() -> None:
    c = attention_case(2, heavy=0.0, sharpness=0.5)
    small = [certify_step(c["q"], c["out"], c["keys"], sample_of(c, torch.full((B, HKV, DROP), p), s),
                          SCALE, 0.95).bound.mean() for p in (0.1, 0.9) for s in range(50)]  # fmt: skip
    true = exact_error(c["q"], c["keys"], c["values"], c["dk"], c["dv"], SCALE)
    wide, narrow = torch.stack(small[:50]).mean(), torch.stack(small[50:]).mean()
    assert float(true.mean()) < float(narrow) < 0.75 * float(wide)


@pytest.mark.parametrize("size", [4.0, 10.0, 39.0])
def test_inclusion_probabilities_sum_to_the_size_within_floor_and_one(size: float) -> None:
    proxy = torch.rand(B, HKV, DROP, generator=torch.Generator().manual_seed(3)) ** 8
    pi = inclusion_probabilities(proxy, size, floor=0.02)
    assert torch.allclose(pi.sum(dim=-1), torch.full((B, HKV), size), rtol=1e-3)
    assert float(pi.min()) >= 0.02 - 1e-7 and float(pi.max()) <= 1.0
    order = torch.argsort(proxy, dim=-1)
    assert bool((torch.gather(pi, -1, order).diff(dim=-1) >= -1e-7).all())  # more attention, more likely


def test_a_floor_above_the_size_samples_every_entry_at_the_floor() -> None:
    pi = inclusion_probabilities(torch.rand(B, HKV, DROP), size=0.5, floor=0.1)
    assert torch.allclose(pi, torch.full_like(pi, 0.1))


def test_sample_rows_are_the_chosen_dropped_entries_with_their_probabilities() -> None:
    c = attention_case(4)
    inclusion = torch.linspace(0.05, 1.0, DROP).expand(B, HKV, DROP)
    s = sample_of(c, inclusion, 7)
    for h in range(HKV):
        rows = s.keys[0, h][s.present[0, h]]
        found = [int((c["dk"][0, h] == row).all(dim=-1).nonzero()) for row in rows]
        assert found == sorted(found)
        assert torch.allclose(s.inclusion[0, h][s.present[0, h]], inclusion[0, h, found])
    assert bool(s.present[..., -1:].any()) or s.present.shape[-1] >= 1
    assert torch.equal(draw_sample(*_span(c), inclusion, (7,)).keys, s.keys)  # seeded: reproducible


def _span(c: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        torch.cat([c["keys"], c["dk"]], dim=2),
        torch.cat([c["values"], c["dv"]], dim=2),
        torch.arange(R, R + DROP).expand(B, HKV, DROP),
    )


def test_dropped_indices_are_the_complement_of_the_kept() -> None:
    kept = torch.tensor([[[0, 3, 4], [1, 2, 5]]])
    assert dropped_indices(kept, 6).tolist() == [[[1, 2, 5], [0, 3, 4]]]


def test_sizes_and_multipliers() -> None:
    assert expected_size(1000, 0.1, 16) == 100 and expected_size(50, 0.1, 16) == 16
    assert expected_size(8, 0.1, 16) == 8
    lam_u, lam_z = multipliers(0.95)
    assert lam_u == pytest.approx(math.sqrt(40)) and lam_z == pytest.approx(math.sqrt(39))
