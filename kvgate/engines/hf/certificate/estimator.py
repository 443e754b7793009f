"""The attention-output error of one decoding step, estimated and bounded from the dropped set.

For a query q of one head, with logits a_j = scale · q·k_j, weights w_j = exp(a_j − lse_R) relative to the
retained set R (so Σ_R w_j = 1), o_R the attention output over R and D the dropped entries, the full
cache's output is (o_R + Σ_D w_j v_j) / (1 + Z_D) with Z_D = Σ_D w_j, hence the error is exactly

    e = ‖o_full − o_R‖ = ‖U‖ / (1 + Z_D),   U = Σ_D w_j (v_j − o_R)  ∈ R^D.

The certificate keeps every dropped key with its value's norm, and the values of a Poisson sample S
(sampling): each step's weights w_j over all of D, hence Z_D, are exact; only U needs the sample. Two
bounds follow, and the certificate is the smaller:

- deterministic (triangle inequality): e ≤ Σ_D w_j (‖v_j‖ + ‖o_R‖) / (1 + Z_D), always;
- probabilistic: the Horvitz–Thompson (1952, JASA 47) total Û = Σ_S w_j (v_j − o_R) / π_j is unbiased for
  U with E‖Û − U‖² = Σ_D (1 − π_j)/π_j w_j² ‖v_j − o_R‖² ≤ σ²_max = Σ_D (1 − π_j)/π_j w_j² (‖v_j‖ +
  ‖o_R‖)², known exactly from what is kept; Chebyshev's inequality, P(‖Û − U‖ ≥ λ σ_max) ≤ 1/λ² with
  λ = √(1/δ), δ = 1 − confidence, gives e ≤ (‖Û‖ + λ σ_max) / (1 + Z_D) with probability ≥ 1 − δ.

Neither rests on an estimate of the variance (no plug-in: a sample that misses a heavy entry cannot
hide it, since the entry's weight is in σ_max and Z_D) nor on a distributional shape (the weights are
exponentials of logits, heavy-tailed). `capped` marks the cells where the deterministic bound is the
smaller. The estimate is Hájek's (1971): with Ẑ = Σ_S w_j / π_j, ê = ‖δ̂‖, δ̂ = Û / (1 + Ẑ), the
ratio normalising itself (a sample that catches a heavy entry inflates both). Its square overstates e²
by the sampling noise of δ̂, whose linearised variance (Särndal, Swensson and Wretman 1992, §5.6; the
ratio's residuals r_j = w_j (v_j − o_R − δ̂)) is estimated by σ̂²_δ = Σ_S (1 − π_j)/π_j² ‖r_j‖² / (1 + Ẑ)²;
the noise-corrected estimate is ẽ = √max(0, ‖δ̂‖² − σ̂²_δ) (the square root and the clamp bias it
downward; bench/certificate_coverage.py measures both). Each cell also reports ‖o_R‖, so
bound and estimate can be read relative to the output they perturb. What is bounded is the attention
output of each head at each step, not the model's next token.

Shapes: B batch, Hkv key heads, G query heads per key head, r retained entries, m sample slots, d dropped
entries, D head dim (L layers where every layer is certified at once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kvgate.engines.hf.certificate.sampling import DroppedSample


@dataclass(frozen=True)
class StepCertificate:
    """[B, Hkv, G] for one layer at one decoding step ([L, B, Hkv, G] for all layers): the estimate, the
    bound, ‖o_R‖ the retained output's norm, `capped` where the deterministic bound is the smaller, and
    the noise-corrected estimate."""

    estimate: torch.Tensor
    bound: torch.Tensor
    output_norm: torch.Tensor
    capped: torch.Tensor
    corrected: torch.Tensor


def multiplier(confidence: float) -> float:
    """λ = √(1/δ): Chebyshev's multiplier for the sampled numerator at δ = 1 − confidence."""
    return math.sqrt(1.0 / (1.0 - confidence))


LSE_CHUNK = 1024
"""Retained positions whose keys are widened to float32 at once, where the cache holds a narrower type
and no matmul can return float32 from it (`retained_lse`)."""


def retained_lse(
    queries: torch.Tensor, keys: torch.Tensor, scale: float, chunk: int = LSE_CHUNK
) -> torch.Tensor:
    """[..., Hkv, G] float32: log Σ_R exp(scale · q·k_j) over the retained keys [..., Hkv, r, D] for
    queries [..., Hkv, G, D], in float32 without a float32 copy of the retained keys per step.

    A float32 cache is read as it is. A float16/bfloat16 one, with queries of its type (the model's own),
    goes through CUDA's matmul with a float32 result (`torch.bmm(..., out_dtype=torch.float32)`: each
    product of two 16-bit floats is exact in float32 and the sums are float32, so the logits equal those
    of widened inputs); elsewhere it is widened `chunk` positions at a time and the chunks' logsumexps
    combined with `torch.logaddexp` (numerically safe: no exponential of an unshifted logit), so at most
    `chunk` positions are widened at a time."""
    if keys.dtype == torch.float32:
        return torch.logsumexp(torch.matmul(queries.float(), keys.transpose(-1, -2)) * scale, dim=-1)
    if keys.is_cuda and queries.dtype == keys.dtype and keys.dtype in (torch.float16, torch.bfloat16):
        lead, g, r = queries.shape[:-2], queries.shape[-2], keys.shape[-2]
        flat_q = queries.reshape(-1, g, queries.shape[-1])
        flat_k = keys.reshape(-1, r, keys.shape[-1])
        try:
            logits = torch.bmm(flat_q, flat_k.transpose(1, 2), out_dtype=torch.float32)
        except (TypeError, RuntimeError):  # a torch without bmm's out_dtype: the chunks below
            pass
        else:
            return torch.logsumexp(logits * scale, dim=-1).reshape(*lead, g)
    q = queries.float()
    total: torch.Tensor | None = None
    for start in range(0, keys.shape[-2], chunk):
        part = keys[..., start : start + chunk, :].float()
        lse = torch.logsumexp(torch.matmul(q, part.transpose(-1, -2)) * scale, dim=-1)
        total = lse if total is None else torch.logaddexp(total, lse)
    if total is None:
        return torch.full(q.shape[:-1], float("-inf"), dtype=torch.float32, device=q.device)
    return total


def certify_step(
    queries: torch.Tensor,
    output: torch.Tensor,
    keys: torch.Tensor,
    sample: DroppedSample,
    scale: float,
    confidence: float,
) -> StepCertificate:
    """queries, output: [B, Hkv, G, D] (rotated queries and the retained cache's attention output);
    keys: [B, Hkv, r, D] the retained cache's keys; `sample` of the dropped entries → estimate and bound."""
    return certify_with_lse(queries, output, retained_lse(queries, keys, scale), sample, scale, confidence)


def certify_with_lse(
    queries: torch.Tensor,
    output: torch.Tensor,
    lse: torch.Tensor,
    sample: DroppedSample,
    scale: float,
    confidence: float,
) -> StepCertificate:
    """As `certify_step`, given the retained log-normaliser lse [..., Hkv, G]; any leading dims (e.g.
    [L, B] for every layer at once, with the sample's tensors stacked the same way)."""
    q = queries.float()
    out = output.float()
    shift = lse.unsqueeze(-1)
    # Every dropped entry: exact weights [..., Hkv, G, d], the normaliser, the deterministic bound.
    every = torch.exp(torch.matmul(q, sample.dropped_keys.transpose(-1, -2)) * scale - shift)
    every = every * sample.dropped_present.unsqueeze(-2)
    denominator = 1.0 + every.sum(dim=-1)  # 1 + Z_D
    output_norm = out.norm(dim=-1)
    radius = sample.dropped_value_norms.unsqueeze(-2) + output_norm.unsqueeze(-1)  # ‖v_j‖ + ‖o_R‖
    deterministic = (every * radius).sum(dim=-1) / denominator
    odds = ((1.0 - sample.dropped_inclusion) / sample.dropped_inclusion).unsqueeze(-2)
    sigma_max = (odds * (every * radius).square()).sum(dim=-1).sqrt()
    # The sample: Û [..., Hkv, G, D], the probabilistic bound, the Hájek estimate and its correction.
    weights = torch.exp(torch.matmul(q, sample.keys.transpose(-1, -2)) * scale - shift)
    weights = weights * sample.present.unsqueeze(-2)  # [..., Hkv, G, m]
    inv = (1.0 / sample.inclusion).unsqueeze(-2)  # [..., Hkv, 1, m]
    diff = sample.values.unsqueeze(-3) - out.unsqueeze(-2)  # [..., Hkv, G, m, D]
    scaled = weights * inv
    numerator = torch.matmul(scaled.unsqueeze(-2), diff).squeeze(-2)  # Û
    probabilistic = (numerator.norm(dim=-1) + multiplier(confidence) * sigma_max) / denominator
    hajek = 1.0 + scaled.sum(dim=-1)  # 1 + Ẑ
    estimate = numerator / hajek.unsqueeze(-1)  # δ̂ = Û / (1 + Ẑ), the estimated o_full − o_R
    squared = (1.0 - sample.inclusion).unsqueeze(-2) * scaled.square()
    residual = (diff - estimate.unsqueeze(-2)).square().sum(dim=-1)  # ‖v_j − o_R − δ̂‖²
    noise = (squared * residual).sum(dim=-1) / hajek.square()
    corrected = (estimate.square().sum(dim=-1) - noise).clamp_min(0.0).sqrt()
    return StepCertificate(
        estimate=estimate.norm(dim=-1),
        bound=torch.minimum(deterministic, probabilistic),
        output_norm=output_norm,
        capped=deterministic < probabilistic,
        corrected=corrected,
    )


def exact_error(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    dropped_keys: torch.Tensor,
    dropped_values: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """[B, Hkv, G]: ‖attention over retained ∪ dropped − attention over retained‖ in float64, computed
    directly (two softmaxes), not through the identity above. queries [B, Hkv, G, D]; keys, values
    [B, Hkv, r, D]; dropped_keys, dropped_values [B, Hkv, d, D]."""
    q = queries.double()
    retained = torch.softmax(torch.matmul(q, keys.double().transpose(-1, -2)) * scale, dim=-1)
    o_r = torch.matmul(retained, values.double())
    all_keys = torch.cat([keys, dropped_keys], dim=2).double()
    all_values = torch.cat([values, dropped_values], dim=2).double()
    full = torch.softmax(torch.matmul(q, all_keys.transpose(-1, -2)) * scale, dim=-1)
    return (torch.matmul(full, all_values) - o_r).norm(dim=-1)
