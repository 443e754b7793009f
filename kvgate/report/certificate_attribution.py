"""Whether an eviction arm's attention-error certificate tells its cache-induced failures from the model's
own (engines/hf/certificate).

Among the cases the candidate fails (a usable pair), a cache-induced failure is one the control passes and
an own failure one the control fails too. The primary score is the certificate's largest bound over decode
steps, layers and heads (`certificate_bound_max`): a high bound says the evicted entries moved attention
outputs. Beside it, on the same cases: the mean bound, and output confidence (−mean token logprob, the
score of the arm's `confidence_auc`), which is what a reader could use without a certificate. Each AUC is
the chance that a cache-induced failure scores above an own failure (ties ½), with DeLong's interval at
the policy's confidence (stats.roc); below MIN_PER_KIND failures of either kind no AUC is given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvgate.report.numbers import finite
from kvgate.report.run_data import ArmRows
from kvgate.stats.roc import delong_auc

MIN_PER_KIND = 10
"""Fewer cache-induced or own failures than this: "too few", no AUC (the normal interval needs more)."""
PRIMARY = "certificate_bound_max"
SECONDARY = "certificate_bound_mean"
CONFIDENCE_SCORE = "-mean_logprob"


def _auc_block(scores: np.ndarray, cache_induced: np.ndarray, confidence: float) -> dict[str, Any] | None:
    found = delong_auc(scores, cache_induced, confidence)
    if found is None:
        return None
    return {
        "auc": finite(found.auc),
        "se": finite(found.se),
        "lower": finite(found.lower),
        "upper": finite(found.upper),
    }


def certificate_attribution(
    cand: ArmRows, control: ArmRows, usable: np.ndarray, confidence: float
) -> dict[str, Any] | None:
    """The block for an arm with certificate values on some usable pair (None otherwise). `usable`: per
    case, both rows present without an engine error (and on the cases the verdict rests on)."""
    certified = usable & np.isfinite(cand.certificate_bound_max)
    if not certified.any():
        return None
    failed = usable & ~cand.passed
    scored = (
        failed
        & np.isfinite(cand.certificate_bound_max)
        & np.isfinite(cand.certificate_bound_mean)
        & np.isfinite(cand.mean_logprob)
    )
    cache_induced = scored & control.passed
    own = scored & ~control.passed
    n_cio, n_own = int(np.count_nonzero(cache_induced)), int(np.count_nonzero(own))
    block: dict[str, Any] = {
        "score": PRIMARY,
        "secondary_score": SECONDARY,
        "confidence_score": CONFIDENCE_SCORE,
        "cache_induced": n_cio,
        "own": n_own,
        "unscored": int(np.count_nonzero(failed & ~scored)),
        "min_per_kind": MIN_PER_KIND,
        "confidence": confidence,
        "method": "DeLong",
        "certificate": None,
        "certificate_mean": None,
        "output_confidence": None,
    }
    if min(n_cio, n_own) < MIN_PER_KIND:
        return block
    positives = cache_induced[scored]
    block["certificate"] = _auc_block(cand.certificate_bound_max[scored], positives, confidence)
    block["certificate_mean"] = _auc_block(cand.certificate_bound_mean[scored], positives, confidence)
    block["output_confidence"] = _auc_block(-cand.mean_logprob[scored], positives, confidence)
    return block
