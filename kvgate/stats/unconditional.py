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


BOUND_SLACK = 1e-3
"""Relative margin of each tail's bound (`tail_bounds`) and again of each ψ's: far above the rounding of
the bound's logarithms, of the incomplete beta function and of a window's pmf and sum (each under 1e-8
relative; the tail P(X ≥ s) = 2^−s, where Feller's bound is exact, is one that rounding puts above it)."""
ONE_BY_ONE = 24
"""ψ whose windows' tails are evaluated as each is summed; then the tails of all the windows still in
question at once (one call, where the bounds prune little: small z)."""
SUBNORMAL_SLACK = 1e-300
"""Absolute margin on each evaluated tail's bound: below ~2e-308 a double loses relative precision."""


def _evaluated(need: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Where `tails` evaluates the incomplete beta function: 0 < need ≤ s and Hoeffding's bound
    exp(−2(need − s/2)²/s) not below e^NEGLIGIBLE_LOG."""
    with np.errstate(divide="ignore", invalid="ignore"):
        negligible = (need > s / 2) & (-2.0 * (need - s / 2) ** 2 / s < NEGLIGIBLE_LOG)
    return (need > 0) & (need <= s) & ~negligible


def tails(need: np.ndarray, s: np.ndarray) -> np.ndarray:
    """P(Binomial(s, ½) ≥ need) per discordant count s (1 where need ≤ 0, 0 where need > s); 0 where
    Hoeffding's bound exp(−2(need − s/2)²/s) is below e^NEGLIGIBLE_LOG."""
    out = np.where(need <= 0, 1.0, 0.0)
    live = _evaluated(need, s)
    out[live] = bdtrc(need[live] - 1, s[live], 0.5)
    return out


def tail_bounds(
    need: np.ndarray, s: np.ndarray, log_factorial: np.ndarray, live: np.ndarray | None = None
) -> np.ndarray:
    """An upper bound of each `tails(need, s)` double, without the incomplete beta function: 1 where
    need ≤ 0 or need ≤ s/2, 0 where `tails` gives 0, else Feller's bound for X ~ Binomial(s, ½) and
    k = need > (s − 1)/2: P(X = j + 1)/P(X = j) = (s − j)/(j + 1) ≤ r = (s − k)/(k + 1) < 1 for j ≥ k,
    so P(X ≥ k) ≤ P(X = k)/(1 − r) = P(X = k)(k + 1)/(2k + 1 − s) (within 1 + 1/z² of the tail at
    z standard deviations), with BOUND_SLACK and SUBNORMAL_SLACK. `log_factorial[m]` is log(m!) for
    m = 0 … max(s); `live`: `_evaluated`'s mask, when already at hand."""
    live = _evaluated(need, s) if live is None else live
    whole = np.clip(need, 0, s).astype(np.int64)
    log_mass = log_factorial[s] - log_factorial[whole] - log_factorial[s - whole] - s * np.log(2.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        feller = np.minimum(np.exp(log_mass) * (need + 1) / (2 * need + 1 - s), 1.0)
    bound = np.where(2 * need + 1 > s, feller * (1 + BOUND_SLACK), 1.0) + SUBNORMAL_SLACK
    return np.where(live, bound, np.where(need <= 0, 1.0, 0.0))


_log_factorial = np.zeros(0)
"""log(m!) = gammaln(m + 1) for m = 0 … len − 1, grown as larger n come (each value the same double
however long the array it was computed in: gammaln is evaluated per element)."""


def log_factorials(n: int) -> np.ndarray:
    """log(m!) for m = 0 … n (at least), computed once per process for the largest n asked."""
    global _log_factorial
    if len(_log_factorial) <= n:
        more = gammaln(np.arange(len(_log_factorial), n + 1) + 1)
        _log_factorial = np.concatenate([_log_factorial, more])
    return _log_factorial


def likely_first(bound_of_tail: np.ndarray, n: int) -> list[int]:
    """The grid's ψ in the order of the mean tail bound over nψ ± σ, where most of Binomial(n, ψ) lies:
    the largest sums come first (an order only; the bounds decide what is summed)."""
    sigma = np.sqrt(n * PSI_GRID * (1 - PSI_GRID))
    lo = np.clip(np.floor(n * PSI_GRID - sigma), 0, n).astype(np.int64)
    end = np.clip(np.ceil(n * PSI_GRID + sigma), 0, n).astype(np.int64) + 1
    total = np.concatenate([[0.0], np.cumsum(bound_of_tail)])
    return np.argsort(-(total[end] - total[lo]) / (end - lo), kind="stable").tolist()


def window_max(values: np.ndarray, lo: np.ndarray, end: np.ndarray) -> np.ndarray:
    """max(values[lo[i]:end[i]]) per window i (each non-empty, end[i] ≤ len(values)), in one pass."""
    edges = np.stack([lo, end], axis=1).ravel()
    return np.maximum.reduceat(np.append(values, 0.0), edges)[::2]


@lru_cache(maxsize=65_536)
def _pvalue(b: int, c: int, n: int) -> float:
    if b <= 0 or b <= c:
        return 1.0
    z = (b - c) / np.sqrt(b + c)
    s = np.arange(n + 1)
    need = np.ceil((s + z * np.sqrt(s)) / 2 - 1e-9)  # smallest b' with z(b', s − b') ≥ z
    if n > FULL_UP_TO:
        return _windowed(need, s, n)
    inner = tails(need, s)
    inner[0] = 0.0  # no discordant pair: z = 0 < the observed z
    log_choose = gammaln(n + 1) - gammaln(s + 1) - gammaln(n - s + 1)
    psi = PSI_GRID[:, None]
    log_pmf = log_choose + s * np.log(psi) + (n - s) * np.log1p(-psi)
    return float(min(1.0, (np.exp(log_pmf) @ inner).max()))


def _windowed(need: np.ndarray, s: np.ndarray, n: int) -> float:
    """The supremum for n > FULL_UP_TO. Binomial(n, ψ) outside nψ ± (12σ + 12) holds < 1e-30, so each ψ
    sums its window only; and its sum is at most the largest tail in its window (its pmf sums to ≤ 1),
    so no larger than its bound, the largest `tail_bounds` value there. The ψ are taken in
    `likely_first` order and each is summed only when its bound is above the largest sum yet, its
    window's tails evaluated as it is (after ONE_BY_ONE sums, those of every window still in question
    at once). At 10⁶ rows the A/A tables have z of 10 to 40, the bounds are within 1% of the tails and
    a few dozen of the 299 ψ are summed, under a tenth of the tails; at small z most are. Each sum taken
    is the double that summing every ψ gives, and those skipped are below one of them: the supremum is
    the same double."""
    half = 12.0 * np.sqrt(n * PSI_GRID * (1 - PSI_GRID)) + 12.0
    lo = np.maximum(0, (n * PSI_GRID - half).astype(np.int64))
    end = np.minimum(n, (n * PSI_GRID + half).astype(np.int64) + 1) + 1
    pending = _evaluated(need, s)
    if not pending.any():
        return 0.0  # every tail with a discordant pair is 0 (or Hoeffding-negligible): every sum is 0
    log_factorial = log_factorials(n)
    bound_of_tail = tail_bounds(need, s, log_factorial, pending)
    bound_of_tail[0] = 0.0  # the tail summed at s = 0 is 0 (below)
    bounds = window_max(bound_of_tail, lo, end) * (1 + BOUND_SLACK)
    inner = np.where(need <= 0, 1.0, 0.0)  # `tails`, its incomplete beta functions evaluated on demand
    inner[0] = 0.0  # no discordant pair: z = 0 < the observed z

    def evaluate(todo: np.ndarray) -> None:
        inner[todo], pending[todo] = bdtrc(need[todo] - 1, s[todo], 0.5), False

    log_choose = log_factorial[n] - log_factorial[s] - log_factorial[n - s]

    def summed(i: int) -> float:
        a, e = int(lo[i]), int(end[i])
        w = s[a:e]
        log_pmf = log_choose[a:e] + w * np.log(PSI_GRID[i]) + (n - w) * np.log1p(-PSI_GRID[i])
        return float(np.exp(log_pmf) @ inner[a:e])

    order = likely_first(bound_of_tail, n)
    best, sums = 0.0, 0
    for at, i in enumerate(order):
        if bounds[i] <= best:
            continue  # its sum cannot exceed `best`
        if sums == ONE_BY_ONE:  # the bounds prune little here: the tails every window left needs, at once
            left = [j for j in order[at:] if bounds[j] > best]
            edges = np.zeros(n + 2, dtype=np.int64)
            np.add.at(edges, lo[left], 1)
            np.add.at(edges, end[left], -1)
            evaluate(np.flatnonzero(pending & (np.cumsum(edges)[: n + 1] > 0)))
        evaluate(lo[i] + np.flatnonzero(pending[lo[i] : end[i]]))
        best, sums = max(best, summed(i)), sums + 1
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
