"""Multiple-testing adjustments, vectorised over leading axes (one row per report or simulated run).

- `weighted_holm`: Holm's step-down with weights (Holm 1979, §4; Benjamini & Hochberg 1997, "Multiple
  hypotheses testing with weights"). Sort by p/w; the j-th hypothesis is rejected when every earlier one
  was and p ≤ α·w / (weight of the hypotheses not yet rejected). Controls the family-wise error rate at α
  under any dependence. Adjusted: p̃_(j) = max_{i ≤ j} min(1, p_(i) · W_(i) / w_(i)), W_(i) the weight
  left at step i; reject exactly when p̃ ≤ α.
- `benjamini_hochberg`: step-up q-values (Benjamini & Hochberg 1995); they control the false-discovery
  rate for independent or positively dependent (PRDS) tests (Benjamini & Yekutieli 2001), as the
  one-sided tests of nested slices of one run are.

A NaN p-value, or a weight of 0, leaves the hypothesis out of the family: its adjusted value is NaN.
"""

from __future__ import annotations

import numpy as np


def weighted_holm(pvalues: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Adjusted p-values of shape (..., m) for p-values (..., m) and non-negative weights (m,) or (..., m).

    Weights need not sum to 1: each row's family is its hypotheses with p not NaN and weight > 0, and
    the weights are taken relative to that family's total.
    """
    p = np.asarray(pvalues, dtype=float)
    w = np.broadcast_to(np.asarray(weights, dtype=float), p.shape)
    if np.any(w < 0):
        raise ValueError("weights must be ≥ 0")
    tested = np.isfinite(p) & (w > 0)
    w_in = np.where(tested, w, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        key = np.where(tested, p / np.where(tested, w, 1.0), np.inf)
    order = np.argsort(key, axis=-1, kind="stable")
    p_sorted = np.take_along_axis(np.where(tested, p, 0.0), order, axis=-1)
    w_sorted = np.take_along_axis(w_in, order, axis=-1)
    left = np.flip(np.cumsum(np.flip(w_sorted, axis=-1), axis=-1), axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.where(w_sorted > 0, np.minimum(1.0, p_sorted * left / w_sorted), np.inf)
    adjusted_sorted = np.maximum.accumulate(step, axis=-1)
    adjusted = np.empty_like(adjusted_sorted)
    np.put_along_axis(adjusted, order, adjusted_sorted, axis=-1)
    return np.where(tested, adjusted, np.nan)


def benjamini_hochberg(pvalues: np.ndarray) -> np.ndarray:
    """BH q-values of shape (..., m); NaN p-values stay NaN and do not count in m."""
    p = np.asarray(pvalues, dtype=float)
    tested = np.isfinite(p)
    m = tested.sum(axis=-1, keepdims=True)
    order = np.argsort(np.where(tested, p, np.inf), axis=-1, kind="stable")
    p_sorted = np.take_along_axis(np.where(tested, p, np.inf), order, axis=-1)
    rank = np.arange(1, p.shape[-1] + 1)
    with np.errstate(invalid="ignore"):
        scaled = np.where(np.isfinite(p_sorted), p_sorted * m / rank, np.inf)
    q_sorted = np.minimum(1.0, np.flip(np.minimum.accumulate(np.flip(scaled, axis=-1), axis=-1), axis=-1))
    q = np.empty_like(q_sorted)
    np.put_along_axis(q, order, q_sorted, axis=-1)
    return np.where(tested, q, np.nan)
