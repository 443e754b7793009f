"""One-sided unconditional exact test of paired proportions (Suissa & Shuster 1991, "The 2 × 2
matched-pairs trial: exact unconditional design and analysis", Biometrics 47).

Of n pairs (the control's passes, each judged by the candidate and the A/A replicate), b are failed by the
candidate alone and c by the replicate alone. H0: the candidate fails alone no more often than the
replicate, p_b ≤ p_c. The statistic is z = (b − c)/√(b + c) (0 when b + c = 0) and the p-value the
largest probability, over the null's boundary p_b = p_c = ψ/2, of a table at least as extreme:

    p(b, c) = sup_ψ Σ_s Binomial(s; n, ψ) · P(Binomial(s, ½) ≥ (s + z·√s)/2)

(s = b' + c' the discordant count; given s, b' is Binomial(s, ½) on the boundary). It does not condition
on b + c as McNemar's exact test does, and it is more powerful at the same size. The supremum is taken
on a grid of ψ (PSI_GRID) — the usual computation (Suissa & Shuster take a grid too).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import bdtrc, gammaln

PSI_GRID = np.concatenate([np.geomspace(1e-4, 0.05, 60), np.linspace(0.05, 1 - 1e-9, 240)[1:]])
"""ψ = p_b + p_c values the supremum is taken over: dense near 0 (few discordant pairs), to 1."""
FULL_UP_TO = 4_000
"""Up to this many pairs every discordant count is summed; beyond, only the window of each ψ's binomial
that holds its mass (a report over 10⁶ rows has slices of 10⁵ pairs and more)."""
NEGLIGIBLE_LOG = -800.0
"""A tail whose Hoeffding bound is below e^−800 (≈ 10^−348, far under the smallest double) is 0.0 as a
double: its incomplete beta function is not evaluated."""


def tails(need: np.ndarray, s: np.ndarray) -> np.ndarray:
    """P(Binomial(s, ½) ≥ need) per discordant count s (1 where need ≤ 0, 0 where need > s); 0 where
    Hoeffding's bound exp(−2(need − s/2)²/s) is below e^NEGLIGIBLE_LOG."""
    out = np.where(need <= 0, 1.0, 0.0)
    live = (need > 0) & (need <= s)
    with np.errstate(divide="ignore", invalid="ignore"):
        negligible = (need > s / 2) & (-2.0 * (need - s / 2) ** 2 / s < NEGLIGIBLE_LOG)
    live &= ~negligible
    out[live] = bdtrc(need[live] - 1, s[live], 0.5)
    return out


@lru_cache(maxsize=65_536)
def _pvalue(b: int, c: int, n: int) -> float:
    if b <= 0 or b <= c:
        return 1.0
    z = (b - c) / np.sqrt(b + c)
    s = np.arange(n + 1)
    need = np.ceil((s + z * np.sqrt(s)) / 2 - 1e-9)  # smallest b' with z(b', s − b') ≥ z
    inner = tails(need, s)
    inner[0] = 0.0  # no discordant pair: z = 0 < the observed z
    if n <= FULL_UP_TO:
        log_choose = gammaln(n + 1) - gammaln(s + 1) - gammaln(n - s + 1)
        psi = PSI_GRID[:, None]
        log_pmf = log_choose + s * np.log(psi) + (n - s) * np.log1p(-psi)
        return float(min(1.0, (np.exp(log_pmf) @ inner).max()))
    # Binomial(n, ψ) outside nψ ± (12σ + 12) holds < 1e-30: each ψ sums its window only, and a window
    # where every tail is 0 adds 0 (and needs no binomial coefficients)
    half = 12.0 * np.sqrt(n * PSI_GRID * (1 - PSI_GRID)) + 12.0
    lo = np.maximum(0, (n * PSI_GRID - half).astype(np.int64))
    end = np.minimum(n, (n * PSI_GRID + half).astype(np.int64) + 1) + 1
    nonzero = np.concatenate([[0], np.cumsum(inner > 0)])
    live = nonzero[end] > nonzero[lo]
    if not live.any():
        return 0.0
    first, stop = int(lo[live].min()), int(end[live].max())
    log_choose = np.zeros(n + 1)
    w = s[first:stop]
    log_choose[first:stop] = gammaln(n + 1) - gammaln(w + 1) - gammaln(n - w + 1)
    best = 0.0
    psi = PSI_GRID[live]
    for log_psi, log_rest, a, e in zip(np.log(psi), np.log1p(-psi), lo[live], end[live], strict=True):
        w = s[a:e]
        log_pmf = log_choose[a:e] + w * log_psi + (n - w) * log_rest
        best = max(best, float(np.exp(log_pmf) @ inner[a:e]))
    return min(1.0, best)


def paired_worse_pvalue(b: np.ndarray, c: np.ndarray, n: np.ndarray) -> np.ndarray:
    """p(b, c) above for arrays broadcast together; 1 where b = 0 or b ≤ c (z ≤ 0 never rejects at any
    level below ½, and 1 keeps such tables out of the way)."""
    b, c, n = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in (b, c, n)))
    out = np.ones(b.shape)
    live = (b > 0) & (b > c) & (n >= b + c)
    if live.any():
        keys = np.stack([b[live], c[live], n[live]], axis=-1)
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        values = np.array([_pvalue(int(x), int(y), int(m)) for x, y, m in unique])
        out[live] = values[inverse.ravel()]
    return out
