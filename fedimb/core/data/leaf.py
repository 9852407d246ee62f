"""LEAF's per-client sample split (Caldas et al., 2018, ``data/utils/split_data.py``), shared
by the LEAF data sets (FEMNIST's writers, Shakespeare's speaking roles): each client's
samples are split at random into training and test samples, the client keeping at least
one training sample."""

from __future__ import annotations

import numpy as np


def leaf_test_split(groups: np.ndarray, test_fraction: float, seed: int) -> np.ndarray:
    """A boolean mask of the test samples: per group (client), the samples beyond its first
    ``max(1, floor((1 - test_fraction) * n))`` in a seeded random order (LEAF's split)."""
    rng = np.random.default_rng([int(seed), 0xFE])
    order = np.argsort(groups, kind="stable")
    _, starts, counts = np.unique(groups[order], return_index=True, return_counts=True)
    test = np.zeros(len(groups), dtype=bool)
    for start, n in zip(starts, counts):
        rows = rng.permutation(order[start : start + n])
        kept = max(1, int(np.floor((1.0 - test_fraction) * n + 1e-9)))
        test[rows[kept:]] = True
    return test
