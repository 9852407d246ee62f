"""Aggregation math shared by strategies: pure numpy, no Flower imports."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

Arrays = Sequence[np.ndarray]


def normalised_weights(weights: Sequence[float]) -> np.ndarray:
    """Non-negative weights scaled to sum to one."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0:
        raise ValueError("need at least one weight")
    if not np.all(np.isfinite(w)) or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"weights must be finite, non-negative and not all zero, got {w.tolist()}")
    return w / w.sum()


def weighted_average(updates: Sequence[Arrays], weights: Sequence[float]) -> list[np.ndarray]:
    """Layer-wise sum_k w_k * x_k / sum_k w_k (FedAvg, McMahan et al. 2017, Alg. 1).

    Accumulates in float64 and returns each layer in its input dtype (integer buffers
    such as BatchNorm's batch counter are rounded).
    """
    if len(updates) != len(weights):
        raise ValueError(f"{len(updates)} updates but {len(weights)} weights")
    w = normalised_weights(weights)
    out = []
    for layer in zip(*updates, strict=True):
        acc = np.zeros(layer[0].shape, dtype=np.float64)
        for wk, arr in zip(w, layer):
            acc += wk * arr
        dtype = layer[0].dtype
        out.append(np.rint(acc).astype(dtype) if np.issubdtype(dtype, np.integer) else acc.astype(dtype))
    return out


def flatten(arrays: Arrays) -> np.ndarray:
    """All floating-point layers concatenated into one float64 vector."""
    parts = [np.ravel(a).astype(np.float64) for a in arrays if np.issubdtype(a.dtype, np.floating)]
    return np.concatenate(parts) if parts else np.zeros(0)


def weight_diversity(updates: Sequence[Arrays]) -> float:
    """ReBaFL eq. 24: Λ = 1/|S| Σ_i ||w_i − w̄||², w̄ the plain mean of the local models."""
    if not updates:
        raise ValueError("need at least one update")
    flat = np.stack([flatten(u) for u in updates])
    return float(np.mean(np.sum((flat - flat.mean(axis=0)) ** 2, axis=1)))


def aggregate_prototypes(
    prototypes: Sequence[Mapping[int, np.ndarray]], counts: Sequence[Mapping[int, int]]
) -> dict[int, np.ndarray]:
    """ReBaFL eq. 23: per class, the average of the clients' prototypes weighted by their
    sample counts n_ic, over the clients that report the class (with a positive count).

    Classes nobody reports are absent from the result; the caller keeps their previous
    prototype (Algorithm 1 under dropout).
    """
    if len(prototypes) != len(counts):
        raise ValueError(f"{len(prototypes)} prototype sets but {len(counts)} count sets")
    sums: dict[int, np.ndarray] = {}
    totals: dict[int, float] = {}
    for protos, n in zip(prototypes, counts):
        for c, vector in protos.items():
            weight = float(n.get(c, 0))
            if weight <= 0:
                continue
            vec = np.asarray(vector, dtype=np.float64)
            sums[int(c)] = sums.get(int(c), np.zeros_like(vec)) + weight * vec
            totals[int(c)] = totals.get(int(c), 0.0) + weight
    return {c: (sums[c] / totals[c]).astype(np.float32) for c in sorted(sums)}
