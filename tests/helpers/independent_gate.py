"""An independent reference for the gate's Monte Carlo: its own counts, scipy.stats tails and quantiles,
and weighted Holm by fixed-point iteration instead of sorting, for cases that fail independently."""

from __future__ import annotations

import numpy as np
from scipy.stats import beta, binom

from kvgate.gate.policy import Policy
from kvgate.gate.simulate import Structure


def independent_rates(
    structure: Structure, policy: Policy, cfr: float, runs: int, seed: int
) -> dict[str, float]:
    """Arm-level pass/fail shares at a true CFR, every case a control pass, no replicate, no clusters."""
    member = structure.membership.toarray() > 0  # (S, N)
    gated, tau = structure.family.gated, structure.family.tau
    alpha = 1 - policy.confidence
    n = member.sum(axis=1)
    rng = np.random.default_rng(seed)
    fails = rng.random((runs, member.shape[1])) < cfr
    k = fails.astype(np.int64) @ member.T.astype(np.int64)  # (R, S)
    p = np.where(k > 0, binom.sf(k - 1, n, tau), 1.0)
    reachable = binom.sf(n - 1, n, tau) < alpha
    n_g, n_s = (reachable & gated).sum(), (reachable & ~gated).sum()
    share_s = policy.signal_alpha if n_s else 0.0
    w = np.where(gated, (1 - share_s) / max(n_g, 1), (share_s if n_g else 1.0) / max(n_s, 1)) * reachable
    rejected = np.zeros(k.shape, dtype=bool)
    while True:  # weighted Holm as a fixed point: thresholds only grow as hypotheses are rejected
        left = (w * (reachable & ~rejected)).sum(axis=1, keepdims=True)
        new = reachable & ~rejected & (p <= alpha * w / np.where(left > 0, left, 1))
        if not new.any():
            break
        rejected |= new
    upper = np.where(k < n, beta.ppf(policy.confidence, k + 1, np.maximum(n - k, 1)), 1.0)
    passes = (upper <= tau) & (n >= policy.min_control_passes)
    arm_fail = rejected.any(axis=1)
    arm_pass = ~arm_fail & np.where(gated, passes, True).all(axis=1)
    return {"fails": float(arm_fail.mean()), "passes": float(arm_pass.mean())}
