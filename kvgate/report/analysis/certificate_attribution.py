"""Whether an eviction arm's attention-error certificate tells its cache-induced failures from the model's
own (engines/hf/certificate).

Among the cases the candidate fails (a usable pair), a cache-induced failure is one the control passes and
an own failure one the control fails too. The primary score, declared before it was measured on a
decisive workload, is the mean relative bound (`certificate_relative_bound_mean`): the bound divided by
the retained output's norm ‖o_R‖, averaged over decoding steps, layers and heads. Its grounds
(docs/certificate.md): it measures how far attention moved in units of the output it moved, so a layer
with large values does not dominate it, and it averages every cell rather than resting on one extreme
(the largest bound was mostly a cap set by the prompt's value norms); the bound rather than the estimate
because it is what the certificate guarantees. Beside it, on the same cases: the bound's max (the former
primary), its mean, the mean relative estimate, and output confidence (−mean token logprob, the score of
the arm's `confidence_auc`), what a reader could use without a certificate; and the mean share of cells
whose bound is the deterministic one. Each AUC is the chance that a cache-induced failure scores
above an own failure (ties ½), with DeLong's interval at the policy's confidence (stats.roc); below
MIN_PER_KIND failures of either kind no AUC is given. Rows stored before the relative columns are unscored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvgate.report.analysis.numbers import finite
from kvgate.report.analysis.run_data import ArmRows
from kvgate.stats.roc import delong_auc

MIN_PER_KIND = 10
"""Fewer cache-induced or own failures than this: "too few", no AUC (the normal interval needs more)."""
PRIMARY = "certificate_relative_bound_mean"
OTHER_SCORES = ("certificate_bound_max", "certificate_bound_mean", "certificate_relative_estimate_mean")
CAP_SHARE = "certificate_cap_share"
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
    scores = cand.certificate
    if not (usable & np.isfinite(scores["certificate_bound_max"])).any():
        return None
    failed = usable & ~cand.passed
    scored = failed & np.isfinite(cand.mean_logprob)
    for name in (PRIMARY, *OTHER_SCORES, CAP_SHARE):
        scored &= np.isfinite(scores[name])
    cache_induced = scored & control.passed
    own = scored & ~control.passed
    n_cio, n_own = int(np.count_nonzero(cache_induced)), int(np.count_nonzero(own))
    block: dict[str, Any] = {
        "score": PRIMARY,
        "confidence_score": CONFIDENCE_SCORE,
        "cache_induced": n_cio,
        "own": n_own,
        "unscored": int(np.count_nonzero(failed & ~scored)),
        "min_per_kind": MIN_PER_KIND,
        "confidence": confidence,
        "method": "DeLong",
        "cap_share": finite(float(scores[CAP_SHARE][scored].mean())) if scored.any() else None,
        "certificate": None,
        "other_scores": {name: None for name in OTHER_SCORES},
        "output_confidence": None,
    }
    if min(n_cio, n_own) < MIN_PER_KIND:
        return block
    positives = cache_induced[scored]
    block["certificate"] = _auc_block(scores[PRIMARY][scored], positives, confidence)
    block["other_scores"] = {
        name: _auc_block(scores[name][scored], positives, confidence) for name in OTHER_SCORES
    }
    block["output_confidence"] = _auc_block(-cand.mean_logprob[scored], positives, confidence)
    return block
