"""Clustered cases: which cases share a cluster, per slice.

Cases that share a prefix group (or another declared cluster column) can fail together: a bad shared
block corrupts every question asked over it. These helpers count a slice's distinct clusters and list its
multi-case clusters with their control passes and failures; stats.cluster_null tests the slice's failure
count on its exact distribution over those clusters.
"""

from __future__ import annotations

import numpy as np


def singletons(clusters: np.ndarray) -> bool:
    """Whether every case is its own cluster (cluster codes 0 … n−1, as analysis.slices gives them then)."""
    c = np.asarray(clusters)
    return bool(c.size == 0 or (c.min() >= 0 and np.bincount(c).max() == 1))


def clusters_per_slice(
    slice_codes: np.ndarray, n_slices: int, clusters: np.ndarray, counted: np.ndarray
) -> np.ndarray:
    """Distinct clusters among the `counted` cases of each slice, shape (n_slices,).

    slice_codes: per case, its slice (−1: none); clusters: per case, its cluster code (≥ 0).
    """
    codes = np.asarray(slice_codes, dtype=np.int64)
    keep = np.asarray(counted, dtype=bool) & (codes >= 0)
    if singletons(clusters):  # every case its own cluster: the count of cases
        return np.bincount(codes[keep], minlength=n_slices)[:n_slices]
    width = int(clusters.max()) + 1 if clusters.size else 1
    pairs = np.unique(codes[keep] * width + np.asarray(clusters, dtype=np.int64)[keep])
    return np.bincount(pairs // width, minlength=n_slices)[:n_slices]


def multi_case_clusters(
    slice_codes: list[np.ndarray],
    offsets: list[int],
    clusters: np.ndarray,
    control: np.ndarray,
    failed: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (slice, cluster) pairs with more than one case, over slice groups laid end to end.

    slice_codes: per group, per case its slice within the group (−1: none); offsets: each group's first
    slice index; clusters: per case its cluster code; control / failed: per case, whether the control
    passes it and whether the candidate fails it too. Returns (slice_of, size, failures) per pair, size
    and failures counted over the control's passes (gate.procedure.Clusters).
    """
    c = np.asarray(clusters, dtype=np.int64)
    if singletons(c):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    width = int(c.max()) + 1
    keys, ctl, bad = [], [], []
    for codes, offset in zip(slice_codes, offsets, strict=True):
        inside = np.asarray(codes) >= 0
        keys.append((np.asarray(codes, dtype=np.int64)[inside] + offset) * width + c[inside])
        ctl.append(np.asarray(control, dtype=np.int64)[inside])
        bad.append((np.asarray(control, dtype=bool) & np.asarray(failed, dtype=bool))[inside])
    key = np.concatenate(keys)
    unique, inverse, cases = np.unique(key, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    size = np.bincount(inverse, weights=np.concatenate(ctl), minlength=unique.size).astype(np.int64)
    fails = np.bincount(inverse, weights=np.concatenate(bad), minlength=unique.size).astype(np.int64)
    multi = cases >= 2
    return (unique[multi] // width).astype(np.int64), size[multi], fails[multi]
