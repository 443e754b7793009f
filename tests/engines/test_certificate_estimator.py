"""The certificate's estimator on synthetic attention: exact with the whole dropped set, unbiased totals
under Poisson sampling, a bound that covers at its confidence, and inclusion probabilities as stated."""

from __future__ import annotations

import math

import pytest
import torch

from kvgate.engines.hf.certificate.estimator import (
    certify_step,
    certify_with_lse,
    exact_error,
    multiplier,
    retained_lse,
)
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
    ones, present = torch.ones(B, HKV, DROP), torch.ones(B, HKV, DROP, dtype=torch.bool)
    return DroppedSample(c["dk"], c["dv"], ones, present, c["dk"], c["dv"].norm(dim=-1), ones, present)


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
    """ê² overstates e² by the sampling noise of Û; ẽ² subtracts its unbiased estimate."""
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
    assert bool((raw_square > 1.05).all()), raw_square
    assert bool(((corrected_square - 1).abs() < 0.05).all()), corrected_square
    assert bool((torch.stack(corrected) <= torch.stack(raw) + 1e-6).all())
    full = certify_step(c["q"], c["out"], c["keys"], full_sample(c), SCALE, 0.95)
    assert torch.allclose(full.corrected, full.estimate)  # π = 1: no noise to remove


def test_the_bound_is_the_smaller_of_the_deterministic_and_the_sampled_one() -> None:
    c = attention_case(0)
    inclusion = torch.full((B, HKV, DROP), 0.05)
    sample = sample_of(c, inclusion, 3)
    assert bool(sample.present.any())
    step = certify_step(c["q"], c["out"], c["keys"], sample, SCALE, 0.95)
    assert torch.allclose(step.output_norm, c["out"].norm(dim=-1))
    # Recomputed here from the definitions: exact weights of every dropped entry, both bounds.
    lse = torch.logsumexp(torch.matmul(c["q"], c["keys"].transpose(-1, -2)) * SCALE, dim=-1, keepdim=True)
    w = torch.exp(torch.matmul(c["q"], c["dk"].transpose(-1, -2)) * SCALE - lse)  # [B, HKV, G, DROP]
    radius = c["dv"].norm(dim=-1).unsqueeze(-2) + step.output_norm.unsqueeze(-1)
    deterministic = (w * radius).sum(-1) / (1 + w.sum(-1))
    sigma = ((1 - 0.05) / 0.05 * (w * radius).square()).sum(-1).sqrt()
    ws = torch.exp(torch.matmul(c["q"], sample.keys.transpose(-1, -2)) * SCALE - lse)
    ws = ws * sample.present.unsqueeze(-2)
    u = torch.matmul((ws / 0.05).unsqueeze(-2), sample.values.unsqueeze(-3) - c["out"].unsqueeze(-2))
    probabilistic = (u.squeeze(-2).norm(dim=-1) + math.sqrt(20) * sigma) / (1 + w.sum(-1))
    assert torch.allclose(step.bound, torch.minimum(deterministic, probabilistic), rtol=1e-5)
    assert torch.equal(step.capped, deterministic < probabilistic)
    true = exact_error(c["q"], c["keys"], c["values"], c["dk"], c["dv"], SCALE)
    assert bool((true <= deterministic.double() + 1e-6).all())  # always, whatever the sample


def test_every_cell_is_covered_even_when_heavy_entries_are_rarely_sampled() -> None:
    """The plug-in of σ̂ would miss with the heavy entries; σ_max knows their weights."""
    c = attention_case(5, heavy=2.0, sharpness=2.0)
    true = exact_error(c["q"], c["keys"], c["values"], c["dk"], c["dv"], SCALE)
    inclusion = torch.full((B, HKV, DROP), 0.3)
    inclusion[..., :3] = 0.05  # the aligned (heavy) entries: the prompt did not see them coming
    draws = 400
    covered = torch.zeros_like(true)
    for seed in range(draws):
        step = certify_step(c["q"], c["out"], c["keys"], sample_of(c, inclusion, seed), SCALE, 0.95)
        covered += (true <= step.bound.double() + 1e-6).double()
    assert float((covered / draws).min()) >= 0.95, covered / draws


def test_a_larger_sample_tightens_the_bound_below_the_deterministic_one() -> None:
    c = attention_case(2, heavy=0.0, sharpness=0.5)
    true = exact_error(c["q"], c["keys"], c["values"], c["dk"], c["dv"], SCALE)
    steps = {
        p: [certify_step(c["q"], c["out"], c["keys"], sample_of(c, torch.full((B, HKV, DROP), p), s),
                         SCALE, 0.95) for s in range(50)]
        for p in (0.1, 0.9)
    }  # fmt: skip
    wide, narrow = (float(torch.stack([st.bound for st in steps[p]]).mean()) for p in (0.1, 0.9))
    capped = {p: float(torch.stack([st.capped for st in steps[p]]).float().mean()) for p in (0.1, 0.9)}
    assert float(true.mean()) < narrow < 0.95 * wide
    assert capped[0.1] > 0.9 and capped[0.9] < 0.1  # the sampled bound wins once the sample is large


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


def test_sizes_and_multiplier() -> None:
    assert expected_size(1000, 0.1, 16) == 100 and expected_size(50, 0.1, 16) == 16
    assert expected_size(8, 0.1, 16) == 8
    assert multiplier(0.95) == pytest.approx(math.sqrt(20))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_retained_normaliser_of_a_narrow_cache_is_float32_in_chunks(dtype: torch.dtype) -> None:
    """A 16-bit cache's logsumexp, widened a few positions at a time and combined, equals the one of the
    whole cache widened at once (the former per-step copy) and float64's, and certifies alike."""
    c = attention_case(3, heavy=4.0)
    keys, q = c["keys"].to(dtype), c["q"].to(dtype)
    whole = torch.logsumexp(torch.matmul(q.float(), keys.float().transpose(-1, -2)) * SCALE, dim=-1)
    reference = torch.logsumexp(torch.matmul(q.double(), keys.double().transpose(-1, -2)) * SCALE, dim=-1)
    for chunk in (5, R, 4 * R):  # several uneven chunks, exactly one, more room than positions
        lse = retained_lse(q, keys, SCALE, chunk=chunk)
        assert lse.dtype == torch.float32 and lse.shape == (B, HKV, G)
        assert torch.allclose(lse, whole, rtol=1e-6, atol=1e-5)
        assert torch.allclose(lse.double(), reference, rtol=1e-6, atol=1e-5)
    in_chunks = retained_lse(q, keys, SCALE, chunk=5)
    chunked = certify_with_lse(q, c["out"], in_chunks, full_sample(c), SCALE, 0.95)
    widened = certify_with_lse(q, c["out"], whole, full_sample(c), SCALE, 0.95)
    assert torch.allclose(chunked.bound, widened.bound, rtol=1e-5)
    assert torch.allclose(chunked.estimate, widened.estimate, rtol=1e-5)


def test_a_float32_cache_is_read_as_it_is() -> None:
    c = attention_case(4)
    lse = retained_lse(c["q"], c["keys"], SCALE)
    direct = torch.logsumexp(torch.matmul(c["q"], c["keys"].transpose(-1, -2)) * SCALE, dim=-1)
    assert torch.equal(lse, direct)
    empty = retained_lse(c["q"].bfloat16(), c["keys"][:, :, :0].bfloat16(), SCALE)
    assert bool(torch.isneginf(empty).all()) and empty.shape == (B, HKV, G)
