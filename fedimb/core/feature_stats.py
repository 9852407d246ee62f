"""Per-class Gaussian statistics of features: each client's moments, their pooling into
the federation's, and virtual features drawn from them (CCVR, Luo et al., NeurIPS 2021,
§4 "Classifier Calibration with Virtual Representations"). Pure numpy, in float64, so
that the pooled moments equal those of the pooled raw features to rounding."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def class_moments(
    features: np.ndarray, labels: np.ndarray, num_classes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One client's per-class mean μ_{c,k}, unbiased covariance Σ_{c,k} (denominator
    N_{c,k} − 1) and count N_{c,k} (CCVR eq. 1): arrays (C, d), (C, d, d) and (C,). A
    class the client lacks has a zero mean; one with a single feature a zero covariance
    (its N − 1 is 0: the paper's formula is undefined there, and zero is what the pooling
    of eq. 3 needs, since that client's term is weighted by N_{c,k} − 1 = 0)."""
    features = np.asarray(features, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    dim = features.shape[1]
    means = np.zeros((num_classes, dim))
    covariances = np.zeros((num_classes, dim, dim))
    counts = np.bincount(labels, minlength=num_classes).astype(np.int64)
    for c in np.flatnonzero(counts):
        z = features[labels == c]
        means[c] = z.mean(axis=0)
        if len(z) > 1:
            centred = z - means[c]
            covariances[c] = centred.T @ centred / (len(z) - 1)
    return means, covariances, counts


def pooled_moments(
    means: Sequence[np.ndarray], covariances: Sequence[np.ndarray], counts: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The federation's per-class mean, covariance and count from the clients' moments.

    Eq. 2: μ_c = Σ_k (N_{c,k} / N_c) μ_{c,k}, N_c = Σ_k N_{c,k}.
    Eq. 3: Σ_c = Σ_k (N_{c,k} − 1)/(N_c − 1) Σ_{c,k} + Σ_k N_{c,k}/(N_c − 1) μ_{c,k} μ_{c,k}ᵀ
    − N_c/(N_c − 1) μ_c μ_cᵀ: within-client scatter plus between-client scatter, the
    unbiased covariance of all the class's features. A class nobody holds keeps a zero
    mean and covariance; one held once in all a zero covariance (N_c − 1 = 0)."""
    mu = np.stack([np.asarray(m, dtype=np.float64) for m in means])  # (K, C, d)
    sigma = np.stack([np.asarray(s, dtype=np.float64) for s in covariances])  # (K, C, d, d)
    n = np.stack([np.asarray(c, dtype=np.float64) for c in counts])  # (K, C)
    total = n.sum(axis=0)  # N_c
    safe = np.where(total > 0, total, 1.0)
    mean = np.einsum("kc,kcd->cd", n, mu) / safe[:, None]
    within = np.einsum("kc,kcde->cde", np.maximum(n - 1, 0), sigma)
    between = np.einsum("kc,kcd,kce->cde", n, mu, mu) - total[:, None, None] * np.einsum(
        "cd,ce->cde", mean, mean
    )
    denominator = np.where(total > 1, total - 1, 1.0)[:, None, None]
    covariance = np.where((total > 1)[:, None, None], (within + between) / denominator, 0.0)
    return mean, covariance, total.astype(np.int64)


def sample_virtual_features(
    mean: np.ndarray,
    covariance: np.ndarray,
    counts: np.ndarray,
    per_class: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """``per_class`` (M_c) virtual features per class from N(μ_c, Σ_c), for every class
    some client holds (§4: classes nobody holds get none), float32 with their labels.
    Drawn as μ_c + F ε, F Fᵀ = Σ_c from its eigendecomposition with rounding's tiny
    negative eigenvalues clipped to zero, so that a singular covariance (fewer features
    than dimensions) still samples."""
    xs, ys = [], []
    for c in np.flatnonzero(np.asarray(counts) > 0):
        eigenvalues, eigenvectors = np.linalg.eigh((covariance[c] + covariance[c].T) / 2)
        factor = eigenvectors * np.sqrt(np.clip(eigenvalues, 0.0, None))  # Σ = F Fᵀ
        noise = rng.standard_normal((per_class, len(eigenvalues)))
        xs.append(mean[c] + noise @ factor.T)
        ys.append(np.full(per_class, c, dtype=np.int64))
    if not xs:
        return np.zeros((0, mean.shape[1]), dtype=np.float32), np.zeros(0, dtype=np.int64)
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys)
