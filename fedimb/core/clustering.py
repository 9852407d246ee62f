"""Label-distribution clustering for FedConcat (Diao et al., AAAI 2024, stage 1)."""

from __future__ import annotations

import numpy as np
import torch


def label_distribution(counts: np.ndarray) -> np.ndarray:
    """Eq. 2: P_i(y) = N_{i,y} / N_i (uniform for an empty client)."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    return counts / total if total > 0 else np.full(counts.shape, 1.0 / counts.size)


def noisy_distribution(counts: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """The label distribution after the Laplace mechanism with budget ``epsilon`` on the
    class counts (sensitivity 1), clipped at zero and renormalised."""
    noisy = np.asarray(counts, dtype=np.float64) + rng.laplace(
        0.0, 1.0 / float(epsilon), size=np.shape(counts)
    )
    return label_distribution(np.clip(noisy, 0.0, None))


@torch.no_grad()
def inferred_distribution(
    model: torch.nn.Module, input_shape: tuple[int, ...], samples: int, seed: int
) -> np.ndarray:
    """Eq. 3 (FedConcat-ID): the mean softmax of ``model`` over ``samples`` random
    standard-normal inputs (our inputs are standardised, so N(0, 1) covers their range)."""
    generator = torch.Generator().manual_seed(int(seed))
    x = torch.randn(
        int(samples), *input_shape, generator=generator
    )  # drawn on the CPU: the same on any device
    model.eval()
    device = next(model.parameters()).device
    return torch.softmax(model(x.to(device)), dim=1).mean(dim=0).double().cpu().numpy()


def kmeans_clusters(distributions: np.ndarray, k: int, seed: int) -> np.ndarray:
    """K-means (Lloyd) cluster id of every row; K is capped at the number of rows."""
    import warnings

    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning

    k = min(int(k), len(distributions))
    with warnings.catch_warnings():  # identical distributions give fewer distinct clusters
        warnings.simplefilter("ignore", ConvergenceWarning)
        return KMeans(n_clusters=k, n_init=10, random_state=int(seed)).fit_predict(
            np.asarray(distributions)
        )


def elbow_inertias(
    distributions: np.ndarray, max_k: int, seed: int
) -> tuple[list[int], list[float]]:
    """Within-cluster sum of squares for K = 1..max_k (the elbow method for choosing K)."""
    import warnings

    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning

    ks = list(range(1, min(int(max_k), len(distributions)) + 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        inertias = [
            float(
                KMeans(n_clusters=k, n_init=10, random_state=int(seed)).fit(distributions).inertia_
            )
            for k in ks
        ]
    return ks, inertias
