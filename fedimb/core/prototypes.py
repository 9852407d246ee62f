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
