"""Class prototypes (mean encoder features per class) and inter-class feature transfer.

Used by ReBaFL (§4.2–4.3): prototypes travel as named payloads, never in the
parameter list.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from fedimb.core import payload


@torch.no_grad()
def class_prototypes(
    encoder: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    indices: torch.Tensor,
    batch_size: int = 500,
    device: torch.device | None = None,
) -> tuple[dict[int, np.ndarray], dict[int, int]]:
    """ReBaFL eq. 21: mean feature of each class present in ``indices``, and its count.

    Runs the encoder in evaluation mode (no dropout, BatchNorm running statistics)."""
    was_training = encoder.training
    encoder.eval()
    sums: dict[int, torch.Tensor] = {}
    counts: dict[int, int] = {}
    for start in range(0, len(indices), batch_size):
        idx = indices[start : start + batch_size]
        xb = x[idx] if device is None else x[idx].to(device)
        features = encoder(xb).double().cpu()
        labels = y[idx]
        for c in labels.unique().tolist():
            mask = labels == c
            sums[c] = sums.get(c, 0) + features[mask].sum(dim=0)
            counts[c] = counts.get(c, 0) + int(mask.sum())
    encoder.train(was_training)
    return {c: (sums[c] / counts[c]).float().numpy() for c in sorted(sums)}, counts


def transfer_features(
    features: torch.Tensor,
    labels: torch.Tensor,
    prototypes: torch.Tensor,
    targets: torch.Tensor,
    lam: float,
) -> torch.Tensor:
    """ReBaFL eq. 15: h̃ = p_target + λ·(h − p_label) for every row of ``features``."""
    return prototypes[targets] + lam * (features - prototypes[labels])


def cyclic_targets(batch_size: int, classes: torch.Tensor) -> torch.Tensor:
    """Target class of the j-th sample: ``classes[j mod K]`` (ReBaFL §4.3)."""
    return classes[torch.arange(batch_size) % len(classes)]


# ------------------------------------------------------------------ payload format
def to_payload(
    prefix: str, prototypes: Mapping[int, np.ndarray], counts: Mapping[int, int] | None = None
) -> dict:
    """Named arrays ``<prefix>_classes``, ``<prefix>_vectors`` (and ``<prefix>_counts``)."""
    classes = sorted(prototypes)
    arrays: dict[str, np.ndarray] = {
        f"{prefix}_classes": np.asarray(classes, dtype=np.int64),
        f"{prefix}_vectors": np.stack([prototypes[c] for c in classes]).astype(np.float32)
        if classes
        else np.zeros((0, 0), dtype=np.float32),
    }
    if counts is not None:
        arrays[f"{prefix}_counts"] = np.asarray([counts[c] for c in classes], dtype=np.int64)
    return payload.pack(arrays)


def from_payload(
    prefix: str, record: Mapping[str, object]
) -> tuple[dict[int, np.ndarray], dict[int, int]]:
    """Inverse of :func:`to_payload`; empty dicts when the record carries none."""
    arrays = payload.unpack(record)
    if f"{prefix}_classes" not in arrays:
        return {}, {}
    classes = arrays[f"{prefix}_classes"].tolist()
    vectors = arrays[f"{prefix}_vectors"]
    counts = arrays.get(f"{prefix}_counts")
    protos = {int(c): vectors[i] for i, c in enumerate(classes)}
    n = {int(c): int(counts[i]) for i, c in enumerate(classes)} if counts is not None else {}
    return protos, n


# ------------------------------------------------------------------ FedNH (Dai et al., 2023)
class _UnitFeatures(torch.nn.Module):
    """The encoder's features divided by their L2 norm (the cosine head's input)."""

    def __init__(self, encoder: torch.nn.Module):
        super().__init__()
        self.encoder = encoder

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.encoder(x)
        return z / z.norm(dim=1, keepdim=True).clamp(min=1e-12)


def unit_feature_means(
    encoder: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    indices: torch.Tensor,
    num_classes: int,
    device: torch.device | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """FedNH's client statistics: per class c, the mean of z/‖z‖ over the local samples
    of c (row c of a dense C x d array; zero for absent classes) and their count n_c.
    The encoder runs in evaluation mode (:func:`class_prototypes`)."""
    means, counts = class_prototypes(_UnitFeatures(encoder), x, y, indices, device=device)
    dim = len(next(iter(means.values()))) if means else 0
    dense = np.zeros((num_classes, dim), dtype=np.float32)
    n = np.zeros(num_classes, dtype=np.int64)
    for c, vector in means.items():
        dense[c], n[c] = vector, counts[c]
    return dense, n


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.maximum(np.linalg.norm(rows, axis=-1, keepdims=True), 1e-12)


def smoothed_prototypes(
    previous: np.ndarray, means: list[np.ndarray], counts: list[np.ndarray], rho: float
) -> np.ndarray:
    """FedNH's server update of the prototypes (C x d), as the authors' code computes it:
    each client's class mean is normalised, the class's normalised means are averaged
    with weights n_k,c / Σ_k n_k,c, the average is normalised to μ_c, and
    p_c ← (ρ·p_c + (1 − ρ)·μ_c) / ‖ρ·p_c + (1 − ρ)·μ_c‖. A class that no client reports
    (Σ_k n_k,c = 0), or whose average (or blend) is the zero vector, keeps p_c."""
    previous = np.asarray(previous, dtype=np.float64)
    total = np.zeros(len(previous))
    weighted = np.zeros_like(previous)
    for mean, count in zip(means, counts, strict=True):
        count = np.asarray(count, dtype=np.float64)
        weighted += count[:, None] * _unit(np.asarray(mean, dtype=np.float64))
        total += count
    average = _unit(weighted / np.maximum(total, 1e-300)[:, None])
    blend = rho * previous + (1 - rho) * average
    moved = (total > 0) & (np.linalg.norm(average, axis=1) > 0.5)  # a unit row, not zero
    moved &= np.linalg.norm(blend, axis=1) > 1e-12
    new = previous.copy()
    new[moved] = _unit(blend[moved])
    return new.astype(np.float32)
