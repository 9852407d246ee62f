"""Aggregation math shared by strategies: pure numpy, no Flower imports."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
        out.append(
            np.rint(acc).astype(dtype) if np.issubdtype(dtype, np.integer) else acc.astype(dtype)
        )
    return out


def weight_diversity(updates: Sequence[Arrays]) -> float:
    """ReBaFL eq. 24: Λ = 1/|S| Σ_i ||w_i − w̄||², w̄ the plain mean of the local models,
    over the floating-point layers (integer buffers such as BatchNorm's counter are no
    weights). Summed layer by layer, so no model-sized float64 copy per client is made
    (it runs every round, on up to hundreds of sampled clients)."""
    if not updates:
        raise ValueError("need at least one update")
    total = 0.0
    for layer in zip(*updates, strict=True):
        if not np.issubdtype(layer[0].dtype, np.floating):
            continue
        stacked = np.stack(layer).reshape(len(layer), -1)
        deviations = stacked - stacked.mean(axis=0, dtype=np.float64)
        total += float(np.einsum("ij,ij->", deviations, deviations))
    return total / len(updates)


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


def zscore_plan(
    class_counts: Sequence[float], tau_d: float
) -> tuple[list[int], list[int], np.ndarray]:
    """Astraea Algorithm 2: z-score augmentation and downsampling plan from global counts.

    With μ and σ the mean and population standard deviation (ddof = 0) of the class
    sizes C_y, and Z_y = (C_y − μ)/σ, a class is augmented if Z_y < τ_a = −1/τ_d and
    downsampled if Z_y > τ_d. Algorithm 2's printed ratio formulas contradict the
    paper's stated ranges (§3.3: an augmented class ends in (C_y, μ + σ·τ_a), a
    downsampled class in (μ + σ·τ_d, C_y)); we use the reading that satisfies both and
    treats the two cases symmetrically: the target size is μ + σ·sign(Z_y)·√(Z_y·τ),
    τ being the threshold the class crossed, and Rad[y] = target / C_y.

    Returns ``(augment_classes, downsample_classes, ratios)``; ``ratios`` covers all
    classes and is 1.0 for untouched ones.
    """
    tau_d = float(tau_d)
    if tau_d <= 0:
        raise ValueError(f"tau_d must be > 0, got {tau_d}")
    counts = np.asarray(class_counts, dtype=np.float64)
    ratios = np.ones(counts.shape[0])
    mu, sigma = counts.mean(), counts.std(ddof=0)
    if sigma == 0:
        return [], [], ratios
    tau_a = -1.0 / tau_d
    z = (counts - mu) / sigma
    augment, downsample = [], []
    for y, zy in enumerate(z):
        if zy < tau_a:
            augment.append(y)
            threshold = tau_a
        elif zy > tau_d:
            downsample.append(y)
            threshold = tau_d
        else:
            continue
        target = mu + sigma * np.sign(zy) * np.sqrt(zy * threshold)
        ratios[y] = target / counts[y] if counts[y] > 0 else 1.0
    return augment, downsample, ratios


def schedule_mediators(label_distributions, gamma: int) -> list[list[int]]:
    """Astraea Algorithm 3: greedy rescheduling of clients into mediators of ≤ γ clients.

    Each step adds to the open mediator the unassigned client k minimising
    D_KL((P_m + P_k) || P_u), where a mediator's distribution is its clients' summed
    label counts, normalised (0·log 0 = 0); ties go to the lowest client index. A new
    mediator opens when the current one holds γ clients. Returns the mediators in
    creation order, each listing client indices in the order they were added.
    """
    from fedimb.core.data.stats import kl_to_uniform

    counts = np.asarray(label_distributions, dtype=np.float64)
    if counts.ndim != 2:
        raise ValueError("label_distributions must be a 2-D array (clients x classes)")
    gamma = int(gamma)
    if gamma < 1:
        raise ValueError(f"gamma must be >= 1, got {gamma}")
    unassigned = list(range(counts.shape[0]))
    mediators: list[list[int]] = []
    while unassigned:
        members: list[int] = []
        total = np.zeros(counts.shape[1])
        while unassigned and len(members) < gamma:
            candidates = np.asarray(unassigned)
            kl = kl_to_uniform(total[None, :] + counts[candidates])
            kl = np.where(np.isnan(kl), np.inf, kl)  # empty distributions go last
            best = int(candidates[int(np.argmin(kl))])  # argmin: first, i.e. lowest index, on ties
            members.append(best)
            total += counts[best]
            unassigned.remove(best)
        mediators.append(members)
    return mediators


def adaptive_q(q: float, sigma_prev: float, sigma_new: float, eta_q: float) -> float:
    """GRP-FED eq. 2: q(t+1) = q(t) + η_q·(σ_{t+1} − σ_t) / ((σ_{t+1} + σ_t)/2).

    σ is the standard deviation of the clients' global training losses; with both σ
    zero the relative change is taken as 0.
    """
    mean = (float(sigma_new) + float(sigma_prev)) / 2.0
    if mean == 0:
        return float(q)
    return float(q) + float(eta_q) * (float(sigma_new) - float(sigma_prev)) / mean


def loss_power_weights(losses: Sequence[float], q: float) -> np.ndarray:
    """GRP-FED eq. 3: λ_m = L_m^q / Σ_i L_i^q (computed in log space, so large q and
    losses do not overflow). Losses must be positive."""
    values = np.asarray(losses, dtype=np.float64)
    if values.size == 0 or np.any(~np.isfinite(values)) or np.any(values <= 0):
        raise ValueError(f"losses must be finite and positive, got {values.tolist()}")
    logits = float(q) * np.log(values)
    weights = np.exp(logits - logits.max())
    return weights / weights.sum()


def qffl_update(
    global_weights: Arrays,
    local_weights: Sequence[Arrays],
    losses: Sequence[float],
    q: float,
    lr: float,
) -> list[np.ndarray]:
    """q-FFL (Li et al., ICLR 2020, Algorithm 2, q-FedAvg): with Δw_k = L·(w − w_k),
    L = 1/lr, h_k = q·F_k^(q−1)·‖Δw_k‖² + L·F_k^q, the update is
    w ← w − Σ_k F_k^q·Δw_k / Σ_k h_k, F_k being client k's loss at the global model."""
    if len(local_weights) != len(losses) or not local_weights:
        raise ValueError("need one loss per local model and at least one model")
    L = 1.0 / float(lr)
    F = np.asarray(losses, dtype=np.float64)
    deltas = [
        [
            L * (np.asarray(g, np.float64) - np.asarray(w, np.float64))
            for g, w in zip(global_weights, local)
        ]
        for local in local_weights
    ]
    norms = np.array([sum(float(np.sum(d * d)) for d in delta) for delta in deltas])
    h = q * np.power(F, q - 1) * norms + L * np.power(F, q)
    out = []
    for i, g in enumerate(global_weights):
        step = sum(np.power(F[k], q) * deltas[k][i] for k in range(len(deltas))) / h.sum()
        new = np.asarray(g, np.float64) - step
        out.append(
            np.rint(new).astype(g.dtype)
            if np.issubdtype(g.dtype, np.integer)
            else new.astype(g.dtype)
        )
    return out


def project_simplex(v: Sequence[float]) -> np.ndarray:
    """Euclidean projection onto the probability simplex (Duchi et al., 2008). The
    projection is unchanged by a shift of every entry, so the largest is moved to 0
    first: the running sums of huge entries (a diverged model's losses) then cannot
    overflow, and the first sorted entry always meets the condition."""
    x = np.asarray(v, dtype=np.float64)
    x = x - x.max()
    u = np.sort(x)[::-1]
    css = np.cumsum(u)
    rho = np.nonzero(u * np.arange(1, len(x) + 1) > (css - 1))[0][-1]
    theta = (css[rho] - 1) / (rho + 1.0)
    return np.maximum(x - theta, 0.0)


def fednova_normaliser(local_steps: int, momentum: float) -> float:
    """FedNova (Wang et al., NeurIPS 2020, §4 and App. C): a_i = ‖a‖₁ of the local
    update's coefficient vector; τ for plain SGD, and for SGD with momentum ρ
    a_i = (τ − ρ(1 − ρ^τ)/(1 − ρ)) / (1 − ρ)."""
    tau, rho = int(local_steps), float(momentum)
    if rho == 0:
        return float(tau)
    return (tau - rho * (1 - rho**tau) / (1 - rho)) / (1 - rho)


def fednova_update(
    global_weights: Arrays,
    local_weights: Sequence[Arrays],
    sizes: Sequence[float],
    normalisers: Sequence[float],
) -> list[np.ndarray]:
    """FedNova: x ← x − τ_eff Σ_i p_i (x − y_i)/a_i with p_i = n_i/n, τ_eff = Σ_i p_i a_i."""
    p = normalised_weights(sizes)
    a = np.asarray(normalisers, dtype=np.float64)
    tau_eff = float(np.sum(p * a))
    out = []
    for layer, g in enumerate(global_weights):
        g64 = np.asarray(g, np.float64)
        step = sum(
            p[i] * (g64 - np.asarray(local[layer], np.float64)) / a[i]
            for i, local in enumerate(local_weights)
        )
        new = g64 - tau_eff * step
        out.append(
            np.rint(new).astype(g.dtype)
            if np.issubdtype(g.dtype, np.integer)
            else new.astype(g.dtype)
        )
    return out


class ServerMomentum:
    """FedAvgM / server SGD with momentum (Hsu et al., 2019): with the pseudo-gradient
    Δ = x − mean(y_i), v ← β·v + Δ and x ← x − η_s·v (β = 0, η_s = 1 is FedAvg)."""

    def __init__(self, lr: float = 1.0, momentum: float = 0.9):
        self.lr, self.momentum = float(lr), float(momentum)
        self.velocity: list[np.ndarray] | None = None

    def step(self, weights: Arrays, average: Arrays) -> list[np.ndarray]:
        deltas = [
            np.asarray(w, np.float64) - np.asarray(m, np.float64) for w, m in zip(weights, average)
        ]
        if self.velocity is None:
            self.velocity = deltas
        else:
            self.velocity = [self.momentum * v + d for v, d in zip(self.velocity, deltas)]
        return [
            np.rint(w - self.lr * v).astype(w.dtype)
            if np.issubdtype(w.dtype, np.integer)
            else (np.asarray(w, np.float64) - self.lr * v).astype(w.dtype)
            for w, v in zip(weights, self.velocity)
        ]
