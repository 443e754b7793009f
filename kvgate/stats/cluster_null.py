"""Exact tests and bounds for a failure count over clusters of unequal size.

A slice's n control passes fall into clusters of sizes m_1 … m_G (cases asked over one shared context).
Within a cluster, the candidate's failures T_i are modelled as beta-binomial with mean rate p and
intra-cluster correlation ρ (Skellam 1948; ρ = 0 is independent cases, T_i ~ Binomial(m_i, p); ρ = 1 a
defect that fails the whole cluster or none of it, T_i ∈ {0, m_i}). Clusters are independent, so the
failure count S = Σ T_i has the exact distribution of the convolution of the clusters' pmfs, which
`sum_pmf` computes (all singletons together as one binomial; the others grouped by size). Tests and
bounds use it directly instead of an effective sample size, so they stay exact however unequal the
clusters are. Among distributions of T_i on [0, m_i] with mean m_i·p the two-point one (ρ = 1) is the
largest in convex order, so ρ = 1 is the worst case any within-cluster dependence can give.

ρ is a nuisance parameter. `icc_upper` bounds it from the run's own clusters by the likelihood ratio
(Wilks) at the pooled rate, on a fixed grid, rounded up to the next grid value; the test then takes the
p-value at that bound plus the bound's error β (Berger & Boos 1994, "P values maximized over a
confidence set for the nuisance parameter"), so it stays valid whatever ρ is. With no failure inside a
multi-case cluster the data say nothing about ρ and the bound is 1.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import bdtr, bdtrc, betaln, gammaln, ndtri

RHO_GRID = np.concatenate([[0.0], np.geomspace(0.001, 1.0, 40)])
"""The ICC values the bound is taken on (rounded up to one of them): 0, then 0.001 to 1 in steps of 19%."""
_EPS = 1e-12


def _log_choose(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    return np.asarray(gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1))


ArrayLike = np.ndarray | float | int


def log_pmf(t: ArrayLike, m: ArrayLike, p: ArrayLike, rho: ArrayLike) -> np.ndarray:
    """log P(T = t) for T beta-binomial(m, mean p, ICC ρ), broadcast over all four arguments.

    The beta's parameters are a = p(1/ρ − 1), b = (1 − p)(1/ρ − 1); ρ = 0 is the binomial and ρ = 1 puts
    mass 1 − p on 0 and p on m (log 0 = −inf elsewhere).
    """
    t, m, p, rho = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (t, m, p, rho)))
    p = np.clip(p, _EPS, 1 - _EPS)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where((rho > 0) & (rho < 1), 1.0 / np.where(rho > 0, rho, 1.0) - 1.0, 1.0)
        a, b = p * scale, (1 - p) * scale
        beta = _log_choose(m, t) + betaln(t + a, m - t + b) - betaln(a, b)
        binom = _log_choose(m, t) + t * np.log(p) + (m - t) * np.log1p(-p)
        whole = np.where(t == 0, np.log1p(-p), np.where(t == m, np.log(p), -np.inf))
    out = np.where(rho <= 0, binom, np.where(rho >= 1, whole, beta))
    return np.where(m <= 1, binom, out)


@lru_cache(maxsize=4096)
def sum_pmf(sizes: tuple[int, ...], singles: int, p: float, rho: float) -> np.ndarray:
    """pmf of S over 0 … n for clusters of `sizes` (each ≥ 2) beside `singles` single cases, shape (n + 1,).

    Clusters of one size are convolved by repeated squaring; the result is clipped at 0 and renormalised
    (the FFT leaves rounding noise of about 1e-16 of the largest mass).
    """
    n = singles + sum(sizes)
    length = 1 << max(1, int(n).bit_length())
    spectrum = np.fft.rfft(_binomial_pmf(singles, p), length)
    sizes_arr = np.asarray(sizes, dtype=np.int64)
    for m in np.unique(sizes_arr):
        count = int(np.count_nonzero(sizes_arr == m))
        pmf = np.exp(log_pmf(np.arange(m + 1), m, p, rho))
        spectrum = spectrum * np.fft.rfft(pmf, length) ** count
    out = np.clip(np.fft.irfft(spectrum, length)[: n + 1], 0.0, None)
    return out / out.sum()


def _binomial_pmf(n: int, p: float) -> np.ndarray:
    return np.exp(log_pmf(np.arange(n + 1), n, p, 0.0))


def tails(k: int, sizes: tuple[int, ...], singles: int, p: float, rho: float) -> tuple[float, float]:
    """(P(S ≥ k), P(S ≤ k)) at rate p and ICC ρ; exact binomial tails when every case is single."""
    if not sizes:
        n = singles
        upper = 1.0 if k <= 0 else float(bdtrc(k - 1, n, p)) if k <= n else 0.0
        return upper, float(bdtr(k, n, p)) if k < n else 1.0
    pmf = sum_pmf(sizes, singles, float(p), float(rho))
    return float(pmf[max(k, 0) :].sum()), float(pmf[: k + 1].sum())


def bounds(k: int, sizes: tuple[int, ...], singles: int, rho: float, level: float) -> tuple[float, float]:
    """One-sided exact (lower, upper) bounds of the rate at error `level` each: the rates whose tail
    P(S ≥ k), resp. P(S ≤ k), equals `level` (Clopper–Pearson when every case is single), by bisection."""
    n = singles + sum(sizes)
    if n == 0:
        return float("nan"), float("nan")

    def solve(tail: int, lo: float, hi: float) -> float:
        for _ in range(50):
            mid = (lo + hi) / 2
            value = tails(k, sizes, singles, mid, rho)[tail]
            # P(S ≥ k) rises with p, P(S ≤ k) falls with p
            if (value < level) == (tail == 0):
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    lower = 0.0 if k <= 0 else solve(0, 0.0, 1.0)
    upper = 1.0 if k >= n else solve(1, 0.0, 1.0)
    return lower, upper


def icc_upper(failed: np.ndarray, size: np.ndarray, beta: float) -> np.ndarray:
    """Upper confidence bound (error β) of the ICC from multi-case clusters, per leading index.

    failed, size: (..., P) failures and control passes per cluster (entries with size < 2 are ignored).
    The log-likelihood at the pooled rate Σt/Σm is evaluated on RHO_GRID; the bound is the grid value
    just above the largest one within z²_{1−β}/2 of the maximum (1 when that is the last). No failure in
    any multi-case cluster: 1.
    """
    t = np.asarray(failed, dtype=float)
    m = np.asarray(size, dtype=float)
    use = m >= 2
    t, m = np.where(use, t, 0.0), np.where(use, m, 0.0)
    total_t, total_m = t.sum(axis=-1), m.sum(axis=-1)
    p = np.where(total_m > 0, total_t / np.maximum(total_m, 1.0), 0.0)
    grid = RHO_GRID
    ll = log_pmf(t[..., None], m[..., None], p[..., None, None], grid).sum(axis=-2)  # (..., R)
    ll = np.where(np.isfinite(ll), ll, -np.inf)
    cut = float(ndtri(1 - beta)) ** 2 / 2
    inside = ll >= ll.max(axis=-1, keepdims=True) - cut
    last = grid.size - 1 - np.argmax(inside[..., ::-1], axis=-1)
    rho = grid[np.minimum(last + 1, grid.size - 1)]
    return np.where(total_t > 0, rho, 1.0)


def design_effect(sizes: np.ndarray, n: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """Kish's design effect 1 + (Σm²/n − 1)·ρ for unequal clusters (Kish 1965, §5.4); Σm²/n at ρ = 1,
    which makes n/deff = n²/Σm², Kish's effective sample size. `sizes`: Σm² per slice."""
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_size = np.where(n > 0, np.asarray(sizes, dtype=float) / np.maximum(n, 1.0), 1.0)
    return 1.0 + (mean_size - 1.0) * np.asarray(rho, dtype=float)


def grouped_tails(
    k: np.ndarray, n: np.ndarray, sizes: np.ndarray, p: float, rho: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(P(S ≥ k), P(S ≤ k), P(S = n)) at rate p for R slices at once, each with its own clusters.

    k, n, rho: (R,); sizes: (R, P) control passes of the slice's clusters (sizes < 2 count as single
    cases). Rows with the same clusters and ρ share one pmf.
    """
    k, n = np.asarray(k, dtype=np.int64), np.asarray(n, dtype=np.int64)
    multi = np.sort(np.where(np.asarray(sizes) >= 2, sizes, 0).astype(np.int64), axis=-1)
    rho_code = np.searchsorted(RHO_GRID, np.asarray(rho, dtype=float))
    keys = np.column_stack([multi, n, rho_code]) if multi.size else np.column_stack([n, rho_code])
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    ge, le, top = np.ones(k.shape), np.ones(k.shape), np.ones(k.shape)
    for u, key in enumerate(unique):
        key_sizes = tuple(int(m) for m in key[:-2] if m)
        singles = int(key[-2]) - sum(key_sizes)
        pmf = sum_pmf(key_sizes, singles, float(p), float(RHO_GRID[min(int(key[-1]), RHO_GRID.size - 1)]))
        idx = np.flatnonzero(inverse == u)
        kk = np.clip(k[idx], 0, pmf.size - 1)
        ge[idx] = np.where(k[idx] <= 0, 1.0, np.cumsum(pmf[::-1])[::-1][kk])
        le[idx] = np.cumsum(pmf)[kk]
        top[idx] = pmf[-1]
    return np.clip(ge, 0.0, 1.0), np.clip(le, 0.0, 1.0), top
