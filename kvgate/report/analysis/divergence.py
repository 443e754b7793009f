"""Where outputs first diverge: a histogram of the token index at which the candidate's output leaves
the control's, split by whether the candidate then failed or still passed."""

from __future__ import annotations

import numpy as np

from kvgate.report.document.findings import Divergence

MAX_BINS = 40


def divergence_summary(first_divergence: np.ndarray, candidate_failed: np.ndarray) -> Divergence:
    """Over usable pairs: `first_divergence` (int, −1: identical output) and the candidate's verdicts."""
    fd = np.asarray(first_divergence, dtype=np.int64)
    failed = np.asarray(candidate_failed, dtype=bool)
    diverged = fd >= 0
    values = fd[diverged]
    top = int(values.max()) + 1 if values.size else 1
    width = max(1, -(-top // MAX_BINS))
    edges = np.arange(0, top + width, width)
    fail_counts, _ = np.histogram(values[failed[diverged]], bins=edges)
    pass_counts, _ = np.histogram(values[~failed[diverged]], bins=edges)
    return Divergence(
        n_pairs=int(fd.size),
        diverged=int(diverged.sum()),
        identical=int((~diverged).sum()),
        diverged_and_failed=int((diverged & failed).sum()),
        identical_and_failed=int((~diverged & failed).sum()),
        median=float(np.median(values)) if values.size else None,
        bin_edges=[int(e) for e in edges],
        failed=[int(c) for c in fail_counts],
        passed=[int(c) for c in pass_counts],
    )
