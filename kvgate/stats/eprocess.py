"""Anytime-valid evidence about a failure rate: mixture likelihood-ratio e-processes (Robbins 1970;
Ramdas, Grünwald, Vovk & Shafer 2023, "Game-theoretic statistics and safe anytime-valid inference").

For k failures among n independent cases, the likelihood ratio of rate p against the null's boundary τ
is L_n(p) = (p/τ)^k ((1 − p)/(1 − τ))^(n − k). A case at true rate p₀ multiplies it, in expectation,
by 1 + (p − τ)(p₀ − τ)/(τ(1 − τ)), which is ≤ 1 whenever p and p₀ lie on opposite sides of τ: under
any rate on the null's side L_n(p) is a nonnegative supermartingale in n, and so is its average over
p on the alternative's side, the mixture

    FAIL (H0: rate ≤ τ):   E_n = ∫_τ^1 L_n(p) dp / (1 − τ)
    PASS (H0: rate ≥ τ):   E_n = ∫_0^τ L_n(p) dp / τ

(uniform mixtures on the alternative's side). By Ville's inequality P(sup_n E_n ≥ 1/α) ≤ α, so the
rule "decide when E_n ≥ 1/α" keeps its error at α however often it is checked, and 1/E_n is an
anytime-valid p-value. Both integrals are incomplete beta functions:
∫_a^b p^k (1 − p)^(n − k) dp = B(k + 1, n − k + 1)·(I_b − I_a).
"""

from __future__ import annotations

import numpy as np
from scipy.special import betainc, betaln


def _log_mixtures(k: np.ndarray, n: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log E of the (FAIL, PASS) mixtures: the regularised incomplete beta I_τ and 1 − I_τ are the two
    sides' shares of B(k + 1, n − k + 1), so one betaln and one betainc call give both (betaincc would
    be ~7× slower here, and where 1 − I_τ loses digits the FAIL e-value is far below 1/α)."""
    a, b = k + 1.0, n - k + 1.0
    below = betainc(a, b, tau)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_scale = betaln(a, b) - (k * np.log(tau) + (n - k) * np.log1p(-tau))
        fail = log_scale + np.log(np.clip(1.0 - below, 0.0, None)) - np.log1p(-tau)
        passing = log_scale + np.log(below) - np.log(tau)
    return fail, passing


def _clip_tau(tau: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.clip(np.broadcast_to(np.asarray(tau, dtype=float), shape), 1e-9, 1 - 1e-9)


def e_values(k: np.ndarray, n: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FAIL, PASS) mixture e-values for k failures of n cases at boundary τ, broadcast; 1 where n = 0.

    τ is clipped to [1e-9, 1 − 1e-9] (τ = 0 or 1 leaves one side with no alternative)."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    tau = _clip_tau(tau, np.broadcast_shapes(k.shape, n.shape))
    log_fail, log_pass = _log_mixtures(k, n, tau)
    fail = np.exp(np.minimum(log_fail, 700.0))
    passing = np.exp(np.minimum(log_pass, 700.0))
    empty = n <= 0
    return np.where(empty, 1.0, np.nan_to_num(fail, nan=0.0)), np.where(
        empty, 1.0, np.nan_to_num(passing, nan=0.0)
    )


def all_failed_e_value(n: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """The FAIL e-value when every one of n cases failed, the largest n cases can give, in closed form:
    ∫_τ^1 (p/τ)^n dp / (1 − τ) = (1 − τ^(n+1)) / ((n + 1) τ^n (1 − τ)); 1 where n = 0."""
    n = np.asarray(n, dtype=float)
    tau = _clip_tau(tau, n.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_e = np.log1p(-(tau ** (n + 1))) - np.log1p(n) - n * np.log(tau) - np.log1p(-tau)
    return np.where(n <= 0, 1.0, np.exp(np.minimum(log_e, 700.0)))
