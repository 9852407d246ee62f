"""Client-side z-score rebalancing (Astraea Algorithm 2, client part): downsample the
majority classes and add augmented copies of minority-class samples."""

from __future__ import annotations

import threading
from collections.abc import Mapping

import numpy as np
import torch

from fedimb.core.aggregate import schedule_mediators
from fedimb.core.data.stats import kl_to_uniform

_GLOBAL_RNG = threading.Lock()  # held while torch's global generator is seeded and drawn from


def affine_augmenter(params: Mapping[str, float], fill: float):
    """Random shift, rotation, shear and zoom (Astraea §3.3) for one (C, H, W) image.

    The paper names the four transformations but not their ranges; the defaults in
    ``conf/method/astraea.yaml`` (±10°, ±10 % shift, ±10° shear, ±10 % zoom) follow
    common MNIST-style augmentation.
    """
    from torchvision.transforms import v2

    return v2.RandomAffine(
        degrees=float(params["rotation"]),
        translate=(float(params["shift"]), float(params["shift"])),
        scale=(1.0 - float(params["zoom"]), 1.0 + float(params["zoom"])),
        shear=float(params["shear"]),
        fill=fill,
    )


def _stochastic_round(value: float, rng: np.random.Generator) -> int:
    base = int(np.floor(value))
    return base + int(rng.random() < value - base)


def apply_plan(
    x: torch.Tensor,
    y: torch.Tensor,
    indices: torch.Tensor,
    ratios: np.ndarray,
    augment_params: Mapping[str, float],
    seed: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The client's rebalanced data set: inputs and labels (originals first).

    A class with ratio r < 1 keeps round(r·n) of its n samples (chosen at random, the
    count stochastically rounded — Algorithm 2's per-sample ``Downsample`` in
    expectation); a class with r > 1 keeps all samples and gains round((r − 1)·n)
    augmented copies, spread over its samples as evenly as possible (Algorithm 2:
    Rad[y] − 1 copies per sample). Deterministic in ``seed``.

    The paper's transformations are for images (N, C, H, W); other inputs (Synthetic's
    feature vectors, ECG beats) have no label-preserving transformation in the paper, so
    their copies are exact: plain oversampling of the minority classes.
    """
    rng = np.random.default_rng(seed)
    labels = y[indices].numpy()
    keep, sources = [], []
    for c in np.unique(labels):
        members = indices.numpy()[labels == c]
        ratio = float(ratios[int(c)])
        if ratio < 1.0:
            k = _stochastic_round(ratio * len(members), rng)
            keep.append(rng.permutation(members)[:k])
            continue
        keep.append(members)
        extra = _stochastic_round((ratio - 1.0) * len(members), rng) if ratio > 1.0 else 0
        if extra > 0:
            reps = np.concatenate(
                [rng.permutation(members) for _ in range(int(np.ceil(extra / len(members))))]
            )
            sources.append(reps[:extra])
    kept = torch.from_numpy(np.sort(np.concatenate(keep)).astype(np.int64))
    x_out, y_out = [x[kept]], [y[kept]]
    if sources:
        source = torch.from_numpy(np.concatenate(sources).astype(np.int64))
        x_out.append(_augmented_copies(x, source, augment_params, seed))
        y_out.append(y[source])
    return torch.cat(x_out).contiguous(), torch.cat(y_out)


def _augmented_copies(
    x: torch.Tensor, source: torch.Tensor, augment_params: Mapping[str, float], seed: int
) -> torch.Tensor:
    """One copy of each ``x[source]``: affinely transformed for images, exact otherwise."""
    if x.dim() != 4:
        return x[source].clone()
    augment = affine_augmenter(augment_params, fill=float(x.min()))
    # torchvision draws from torch's global generator: clients that rebalance at once in
    # one process (the in-process runtime's threads) would take each other's numbers
    with _GLOBAL_RNG, torch.random.fork_rng():
        torch.manual_seed(seed)
        return torch.stack([augment(x[i]) for i in source.tolist()])


def largest_after_plan(original: np.ndarray, ratios: np.ndarray) -> np.ndarray:
    """The most samples per class a client holding ``original`` can have after the plan:
    a class keeps at most its n samples when downsampled and gains at most ⌈(r − 1)·n⌉
    copies when augmented (Algorithm 2, stochastically rounded)."""
    n = original.astype(np.float64)
    return n + np.ceil(np.maximum(ratios - 1.0, 0.0) * n)


def beyond_plan(original: np.ndarray, counts: np.ndarray, ratios: np.ndarray) -> str | None:
    """Why the rebalanced histogram ``counts`` is not one the plan can make from
    ``original``, or None."""
    most = largest_after_plan(original, ratios)
    if np.any(counts > most):
        c = int(np.argmax(counts - most))
        return (
            f"class {c} holds {int(counts[c]):,} samples after the plan, "
            f"at most {int(most[c]):,} possible"
        )
    return None


def grouped_by_kld(
    clients: list[int], counts: Mapping[int, np.ndarray], gamma: int
) -> list[list[int]]:
    """``clients`` grouped into mediators of at most ``gamma`` by their histograms
    ``counts[client]`` (Algorithm 3, :func:`fedimb.core.aggregate.schedule_mediators`)."""
    if not clients:
        return []
    groups = schedule_mediators(np.stack([counts[p] for p in clients]), gamma)
    return [[clients[i] for i in g] for g in groups]


def clip_ratios(ratios: np.ndarray, max_ratio: float) -> tuple[np.ndarray, str | None]:
    """The plan's ratios clipped to ``max_ratio``, with a note where that changed them;
    ratios that are not finite (no plan can be trusted) become 1: no rebalancing."""
    if not np.all(np.isfinite(ratios)):
        return np.ones(len(ratios)), "z-score ratios not finite: no rebalancing"
    note = None
    if ratios.max(initial=0) > max_ratio:
        note = f"z-score ratios up to {ratios.max():.3g} clipped to max_ratio {max_ratio:g}"
    return np.minimum(ratios, max_ratio), note


def mean_kl(histograms: list[np.ndarray]) -> float | None:
    """The mean KL divergence to uniform of ``histograms`` (Astraea's Fig. 8), None for none."""
    return float(np.nanmean([kl_to_uniform(h) for h in histograms])) if histograms else None
