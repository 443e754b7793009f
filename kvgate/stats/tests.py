"""Paired tests: McNemar's exact test on discordant pairs, Holm's step-down correction, and AUC."""

from __future__ import annotations

from collections.abc import Sequence

from scipy.stats import binomtest, mannwhitneyu


def mcnemar_exact(b: int, c: int) -> float | None:
    """Two-sided exact McNemar p-value for b and c discordant pairs (a binomial test at 1/2).

    McNemar, 1947. None when there are no discordant pairs (nothing to test).
    """
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be ≥ 0")
    if b + c == 0:
        return None
    return float(binomtest(b, b + c, 0.5).pvalue)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm (1979) step-down adjusted p-values, in input order; None entries are left out and kept None."""
    present = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(present)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def auc(scores: Sequence[float], positives: Sequence[bool]) -> float | None:
    """Area under the ROC curve of `scores` for predicting `positives` (ties count half).

    Computed as the Mann–Whitney U statistic / (n_pos · n_neg); None when either class is empty.
    """
    pos = [s for s, y in zip(scores, positives, strict=True) if y]
    neg = [s for s, y in zip(scores, positives, strict=True) if not y]
    if not pos or not neg:
        return None
    u = mannwhitneyu(pos, neg, alternative="two-sided").statistic
    return float(u) / (len(pos) * len(neg))
