"""Label statistics of a federation: histograms and divergence from uniform."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def label_counts(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Histogram of integer labels over ``num_classes`` classes."""
    return np.bincount(np.asarray(labels, dtype=np.int64), minlength=num_classes)[:num_classes]


def kl_to_uniform(counts: np.ndarray) -> np.ndarray | float:
    """D_KL(P || U) of the label distribution(s) ``counts`` (rows), with 0·log 0 = 0.

    An empty histogram has no distribution; its divergence is reported as NaN.
    """
    counts = np.asarray(counts, dtype=np.float64)
    single = counts.ndim == 1
    counts = np.atleast_2d(counts)
    totals = counts.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = counts / totals
        terms = np.where(p > 0, p * np.log(p * counts.shape[1]), 0.0)
    kl = terms.sum(axis=1)
    kl[totals[:, 0] == 0] = np.nan
    return float(kl[0]) if single else kl


def partition_summary(
    counts: np.ndarray, groups: Sequence[int] | np.ndarray | None = None
) -> dict[str, object]:
    """JSON-ready description of a partition: per-client and global class counts, KLD."""
    counts = np.asarray(counts, dtype=np.int64)
    kl = np.atleast_1d(kl_to_uniform(counts))  # one value per client
    summary: dict[str, object] = {
        "num_clients": int(counts.shape[0]),
        "num_classes": int(counts.shape[1]),
        "global_counts": counts.sum(axis=0).tolist(),
        "client_sizes": counts.sum(axis=1).tolist(),
        "client_counts": counts.tolist(),
        "client_kl_to_uniform": [None if np.isnan(v) else round(float(v), 6) for v in kl],
        "mean_client_kl_to_uniform": float(np.nanmean(kl)) if np.isfinite(kl).any() else None,
        "global_kl_to_uniform": None
        if np.isnan(global_kl := kl_to_uniform(counts.sum(axis=0)))
        else global_kl,
    }
    if groups is not None:
        summary["client_groups"] = [int(g) for g in groups]
    return summary
