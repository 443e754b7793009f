"""What the gate decides an arm on: per-slice counts, and the slices' multi-case clusters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Clusters:
    """The multi-case clusters of each slice: P (slice, cluster) slots."""

    slice_of: np.ndarray
    """(P,) the slice each slot belongs to."""
    size: np.ndarray
    """(..., P) control passes in the cluster (within the slice)."""
    failed: np.ndarray
    """(..., P) of them, the candidate's failures."""


@dataclass(frozen=True)
class SliceCounts:
    """One arm's counts per slice, arrays of shape (..., S)."""

    failures: np.ndarray
    control_passes: np.ndarray
    clusters: np.ndarray
    """Distinct clusters among the control passes (= control_passes without clustering)."""
    aa_failures: np.ndarray | None = None
    """Control passes the A/A replicate fails; None when the run has no replicate."""
    aa_passes: np.ndarray | None = None
    """Control passes with a replicate verdict."""
    aa_candidate_only: np.ndarray | None = None
    """Of those, the ones the candidate fails and the replicate passes (discordant pairs b)."""
    aa_replicate_only: np.ndarray | None = None
    """… and the ones the replicate fails and the candidate passes (discordant pairs c)."""
    grouped: Clusters | None = None
    """The clusters of more than one case; None when every case is its own cluster."""
