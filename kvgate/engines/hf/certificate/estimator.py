"""The attention-output error of one decoding step, estimated and bounded from the dropped sample.

For a query q of one head, with logits a_j = scale · q·k_j, weights w_j = exp(a_j − lse_R) relative to the
retained set R (so Σ_R w_j = 1), o_R the attention output over R and D the dropped entries, the full
cache's output is (o_R + Σ_D w_j v_j) / (1 + Z_D) with Z_D = Σ_D w_j, hence the error is exactly

    e = ‖o_full − o_R‖ = ‖U‖ / (1 + Z_D),   U = Σ_D w_j (v_j − o_R)  ∈ R^D.

Horvitz–Thompson (1952, JASA 47) totals over the Poisson sample S estimate U and Z_D without bias:
Û = Σ_S u_j / π_j, Ẑ = Σ_S w_j / π_j; their ratio is the Hájek (1971) estimate of the dropped tail's mean
value. Under Poisson sampling E‖Û − U‖² = Σ_D (1 − π_j)/π_j ‖u_j‖² and Var Ẑ = Σ_D (1 − π_j)/π_j w_j²,
estimated without bias by σ̂²_U = Σ_S (1 − π_j)/π_j² ‖u_j‖² and σ̂²_Z = Σ_S (1 − π_j)/π_j² w_j² (Särndal
et al. 1992, eq. 3.5.13). The estimate is the Hájek one, ê = ‖Û‖ / (1 + Ẑ). Its square overstates e² by
the sampling noise of δ̂ = Û / (1 + Ẑ), whose linearised variance (Särndal et al. §5.6, the ratio's residuals
r_j = w_j (v_j − o_R − δ̂)) is estimated by σ̂²_δ = Σ_S (1 − π_j)/π_j² ‖r_j‖² / (1 + Ẑ)²; the
noise-corrected estimate is ẽ = √max(0, ‖δ̂‖² − σ̂²_δ), kept beside ê (bench/certificate_coverage.py
measures both against the exact error). The bound spends δ = 1 − confidence half on each side, with
inequalities that need no distributional shape (the weights are exponentials of logits, heavy-tailed, so
a normal approximation is not assumed): Chebyshev's on the norm of Û − U,
P(‖Û − U‖ ≥ λ σ) ≤ 1/λ², λ_U = √(2/δ); Cantelli's one-sided one on Ẑ, λ_Z = √(2/δ − 1). Then, with
probability ≥ 1 − δ up to the plug-in of σ̂ for σ,

    e ≤ (‖Û‖ + λ_U σ̂_U) / (1 + max(0, Ẑ − λ_Z σ̂_Z)),

capped by the deterministic e ≤ max_D ‖v_j − o_R‖ ≤ max_D ‖v_j‖ + ‖o_R‖ (e is a share of that distance).
Each cell also reports ‖o_R‖, so bound and estimate can be read relative to the output they perturb, and
whether the cap (a statistic of the prompt's value norms, not of attention) is what binds.
The floor on π keeps every term's weight 1/π_j finite, so σ is finite. What is bounded is the attention
output of each head at each step, not the model's next token.

Shapes: B batch, Hkv key heads, G query heads per key head, r retained entries, m sample slots, D head dim
(L layers where every layer is certified at once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kvgate.engines.hf.certificate.sampling import DroppedSample


@dataclass(frozen=True)
class StepCertificate:
    """[B, Hkv, G] for one layer at one decoding step ([L, B, Hkv, G] for all layers): the estimate, the
    noise-corrected estimate and the bound of the error, ‖o_R‖ the retained output's norm, `capped` where
    the cap is the bound."""

    estimate: torch.Tensor
    bound: torch.Tensor
    output_norm: torch.Tensor
    capped: torch.Tensor
    corrected: torch.Tensor


def multipliers(confidence: float) -> tuple[float, float]:
    """(λ_U, λ_Z): Chebyshev's for the numerator and Cantelli's for the denominator, δ/2 each."""
    delta = 1.0 - confidence
    return math.sqrt(2.0 / delta), math.sqrt(2.0 / delta - 1.0)


def retained_lse(queries: torch.Tensor, keys: torch.Tensor, scale: float) -> torch.Tensor:
    """[..., Hkv, G]: log Σ_R exp(scale · q·k_j) over the retained keys [..., Hkv, r, D] for queries
    [..., Hkv, G, D]."""
    return torch.logsumexp(torch.matmul(queries.float(), keys.float().transpose(-1, -2)) * scale, dim=-1)


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
    logits = torch.matmul(q, sample.keys.transpose(-1, -2)) * scale  # [..., Hkv, G, m]
    weights = torch.exp(logits - lse.unsqueeze(-1)) * sample.present.unsqueeze(-2)
    inv = (1.0 / sample.inclusion).unsqueeze(-2)  # [..., Hkv, 1, m]
    coef = (1.0 - sample.inclusion).unsqueeze(-2) * inv * inv
    diff = sample.values.unsqueeze(-3) - out.unsqueeze(-2)  # [..., Hkv, G, m, D]
    scaled = weights * inv
    numerator = torch.matmul(scaled.unsqueeze(-2), diff).squeeze(-2)  # Û [..., Hkv, G, D]
    tail = scaled.sum(dim=-1)  # Ẑ [..., Hkv, G]
    squared = weights * weights * coef
    distance = diff.square().sum(dim=-1)  # ‖v_j − o_R‖² [..., Hkv, G, m]
    sigma_u = (squared * distance).sum(dim=-1).sqrt()
    sigma_z = squared.sum(dim=-1).sqrt()
    lam_u, lam_z = multipliers(confidence)
    norm = numerator.norm(dim=-1)
    shift = numerator / (1.0 + tail).unsqueeze(-1)  # δ̂ = Û / (1 + Ẑ), the estimated o_full − o_R
    cross = torch.matmul(diff, shift.unsqueeze(-1)).squeeze(-1)  # (v_j − o_R)·δ̂
    residual = distance - 2.0 * cross + shift.square().sum(dim=-1, keepdim=True)  # ‖v_j − o_R − δ̂‖²
    noise = (squared * residual).sum(dim=-1) / (1.0 + tail).square()
    corrected = (shift.square().sum(dim=-1) - noise).clamp_min(0.0).sqrt()
    bound = (norm + lam_u * sigma_u) / (1.0 + (tail - lam_z * sigma_z).clamp_min(0.0))
    output_norm = out.norm(dim=-1)
    cap = sample.value_radius.unsqueeze(-1) + output_norm
    return StepCertificate(
        norm / (1.0 + tail), torch.minimum(bound, cap), output_norm, cap < bound, corrected
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
