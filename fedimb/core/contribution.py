"""Contribution normalisation (``normalize=latent_cosine``): factors Λ_r from the cosine
similarities of the clients' mean latent representations, which the base strategy
multiplies into a method's aggregation weights. Pure numpy, no Flower imports."""

from __future__ import annotations

import numpy as np


def contribution_factors(latents, temperature: float = 1.0) -> np.ndarray:
    """Contribution normalisation (eqs. 4, 5 and 8): with S the cosine-similarity matrix
    of the clients' mean latent representations (S(r, r) = 1) and s_q = Σ_p S(q, p),

        Λ_r = Σ_{q≠r} exp(s_q / T) / Σ_q exp(s_q / T),

    i.e. 1 − softmax(s/T)_r: a client whose representation resembles everyone else's
    (large s_r) contributes less. A zero latent vector has similarity 0 to the others.

    Bound: the softmax sums to 1, so Σ_r Λ_r = R − 1, and with base weights ν (shares
    ν̃ = ν/Σν) client r's normalised share Λ_r·ν_r/(Λ·ν) is at most ν̃_r/(1 − max_q ν̃_q):
    with equal ν a client can gain at most the factor R/(R − 1) (+5% at R = 20) while
    the most typical clients can lose all of their weight. As T → 0 the softmax becomes
    the indicator of the largest s_q: that client gets Λ = 0, every other Λ = 1.
    """
    z = np.asarray(latents, dtype=np.float64)
    if z.ndim != 2 or len(z) < 1:
        raise ValueError("latents must be a 2-D array with one row per client")
    if float(temperature) <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    norms = np.linalg.norm(z, axis=1)
    unit = z / np.where(norms > 0, norms, 1.0)[:, None]
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, 1.0)
    scores = similarity.sum(axis=1) / float(temperature)
    exp = np.exp(scores - scores.max())
    return 1.0 - exp / exp.sum()
