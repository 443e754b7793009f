"""How good is the gate itself? Its operating characteristics by simulation, and exactly.

For a slice with n control passes and a true cache-induced failure rate p, the numerator is
k ~ Binomial(n, p). Drawing k for many simulated runs (vectorised, seeded) and applying the gate's own
decision rule gives the share of runs that pass, fail or stay inconclusive. Two points matter:
p = τ (a candidate exactly at the limit: passing it is a false accept, at most 1 − confidence under the
upper-bound rule) and p = 2τ (a clearly bad candidate: the power is the share of runs that fail it).
The same probabilities summed exactly over the binomial distribution check the simulation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from kvgate.gate.decision import FAIL, INCONCLUSIVE, PASS, decide
from kvgate.gate.policy import Policy


@dataclass(frozen=True)
class Rates:
    """Shares of runs that pass, fail and stay inconclusive at one true CFR."""

    cfr: float
    passes: float
    fails: float
    inconclusive: float


@dataclass(frozen=True)
class Operating:
    """The gate at n control passes: simulated and exact rates at CFR = τ and CFR = 2τ."""

    n: int
    runs: int
    at_tau: Rates
    at_2tau: Rates
    exact_at_tau: Rates
    exact_at_2tau: Rates

    @property
    def false_accept(self) -> float:
        return self.at_tau.passes

    @property
    def power(self) -> float:
        return self.at_2tau.fails

    def standard_error(self, rate: float) -> float:
        """Monte Carlo standard error of a simulated share."""
        return float(np.sqrt(max(0.0, rate * (1 - rate)) / self.runs))


def _rates(cfr: float, codes: np.ndarray, weights: np.ndarray | None = None) -> Rates:
    w = np.ones(codes.shape) / codes.size if weights is None else weights
    return Rates(
        cfr=cfr,
        passes=float(w[codes == PASS].sum()),
        fails=float(w[codes == FAIL].sum()),
        inconclusive=float(w[codes == INCONCLUSIVE].sum()),
    )


def simulated(n: int, cfr: float, policy: Policy, runs: int, rng: np.random.Generator) -> Rates:
    k = rng.binomial(n, min(cfr, 1.0), size=runs)
    return _rates(cfr, decide(k, np.full(runs, n), policy.tau, policy))


def exact(n: int, cfr: float, policy: Policy) -> Rates:
    k = np.arange(n + 1)
    return _rates(cfr, decide(k, np.full(n + 1, n), policy.tau, policy), binom.pmf(k, n, min(cfr, 1.0)))


def operating(n: int, policy: Policy, runs: int = 10_000, seed: int = 0) -> Operating:
    """The gate's false-accept rate at CFR = τ and power at CFR = 2τ for one slice of n control passes."""
    if n < 1 or runs < 1:
        raise ValueError("n and runs must be ≥ 1")
    rng = np.random.default_rng(seed)
    tau = policy.tau
    return Operating(
        n=n,
        runs=runs,
        at_tau=simulated(n, tau, policy, runs, rng),
        at_2tau=simulated(n, 2 * tau, policy, runs, rng),
        exact_at_tau=exact(n, tau, policy),
        exact_at_2tau=exact(n, 2 * tau, policy),
    )
