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


@lru_cache(maxsize=65_536)
def _pvalue(b: int, c: int, n: int) -> float:
    if b <= 0 or b <= c:
        return 1.0
    z = (b - c) / np.sqrt(b + c)
    s = np.arange(n + 1)
    need = np.ceil((s + z * np.sqrt(s)) / 2 - 1e-9)  # smallest b' with z(b', s − b') ≥ z
    inner = np.where(need <= 0, 1.0, np.where(need > s, 0.0, bdtrc(np.maximum(need - 1, 0), s, 0.5)))
    inner[0] = 0.0  # no discordant pair: z = 0 < the observed z
    log_choose = gammaln(n + 1) - gammaln(s + 1) - gammaln(n - s + 1)
    if n <= FULL_UP_TO:
        psi = PSI_GRID[:, None]
        log_pmf = log_choose + s * np.log(psi) + (n - s) * np.log1p(-psi)
        return float(min(1.0, (np.exp(log_pmf) @ inner).max()))
    best = 0.0
    for psi in PSI_GRID:  # Binomial(n, ψ) outside nψ ± (12σ + 12) holds < 1e-30: left out
        half = 12.0 * np.sqrt(n * psi * (1 - psi)) + 12.0
        lo, hi = max(0, int(n * psi - half)), min(n, int(n * psi + half) + 1)
        w = s[lo : hi + 1]
        log_pmf = log_choose[lo : hi + 1] + w * np.log(psi) + (n - w) * np.log1p(-psi)
        best = max(best, float(np.exp(log_pmf) @ inner[lo : hi + 1]))
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
