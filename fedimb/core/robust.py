"""Robust aggregation of client models (``aggregation=`` in the configuration).

Most rules are Flower's own (:mod:`flwr.server.strategy.aggregate`); this module adapts
their input (lists of ``(arrays, weight)`` pairs), clips updates, buckets them, checks
that a round has enough updates for the rule, records which clients each rule set aside,
and gives every layer back its model dtype (Flower's median and means return floats for
integer buffers such as BatchNorm's batch counter). ``mean`` is
:func:`fedimb.core.aggregate.weighted_average` itself, so runs with the default settings
do not change by a bit.

- ``median``: coordinate-wise median (Yin et al., 2018); weights are ignored.
- ``trimmed_mean``: coordinate-wise mean after cutting ``int(beta * n)`` values at each
  end (Yin et al., 2018), or f values where ``beta`` is null; weights are ignored.
- ``krum``: the one client model with the smallest sum of squared distances to its
  n − f − 2 nearest others (Blanchard et al., 2017).
- ``multikrum``: Multi-Krum of the same paper with m = n − f: the m models with the best
  Krum scores, averaged with the method's weights.
- ``bulyan``: El Mhamdi et al., 2018, with Krum as the selection rule: θ = n − 2f models
  chosen by repeated Krum, then per coordinate the mean of the β = θ − 2f values closest
  to their median.
- ``centered_clip``: centred clipping (Karimireddy, He & Jaggi, 2021), :func:`centered_clip`.
- ``bucket_size`` s (with any rule but ``mean``): bucketing (Karimireddy, He & Jaggi,
  2022), :func:`buckets`: the rule combines the means of random buckets of s updates.

f and the fewest updates each rule needs: :mod:`fedimb.core.robust_settings`.

Set-aside clients (:func:`combine_recorded`'s third item: the clients a rule left out or
down-weighted, as indices into its input):

- ``mean``: none. ``max_update_norm`` (any rule): also the clients whose update was clipped.
- ``krum``: every client but the chosen one; ``multikrum``: the f clients not selected;
  ``bulyan``: the 2f clients outside its repeated-Krum selection.
- ``median``, ``trimmed_mean``: a client whose value is discarded in more than half of
  the floating-point coordinates, where the median keeps the middle n − 2f values of each
  coordinate and the trimmed mean the values it averages.
- ``centered_clip``: the clients farther than τ from the centre in the last iteration
  (their weight was cut).
- with bucketing: every client of a bucket the rule set aside.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from flwr.server.strategy.aggregate import (
    aggregate_bulyan,
    aggregate_krum,
    aggregate_median,
    aggregate_trimmed_avg,
)

from fedimb.core.aggregate import normalised_weights, weighted_average
from fedimb.core.robust_settings import (
    RULES,
    RobustSettings,
    assumption,
    check,
    minimum_updates,
)

__all__ = ["RULES", "RobustSettings", "check", "combine", "combine_recorded", "minimum_updates"]

Model = Sequence[np.ndarray]


def _float_layers(model: Model) -> list[int]:
    return [i for i, a in enumerate(model) if np.issubdtype(a.dtype, np.floating)]


def update_norm(arrays: Model, global_weights: Model) -> float:
    """‖w − w_global‖ over all floating-point arrays together."""
    return math.sqrt(
        sum(
            float(np.sum((arrays[i].astype(np.float64) - global_weights[i]) ** 2))
            for i in _float_layers(arrays)
        )
    )


def clip_update(arrays: Model, global_weights: Model, max_norm: float) -> list[np.ndarray]:
    """The client model whose update Δ = w − w_global has L2 norm at most ``max_norm``
    over all floating-point arrays (integer buffers are counters, not weights, and are
    kept). A model within the bound is returned unchanged, to the bit."""
    norm = update_norm(arrays, global_weights)
    if norm <= max_norm:
        return list(arrays)
    scale = max_norm / norm
    clipped = list(arrays)
    for i in _float_layers(arrays):
        base = np.asarray(global_weights[i], dtype=np.float64)
        clipped[i] = (base + scale * (arrays[i].astype(np.float64) - base)).astype(arrays[i].dtype)
    return clipped


def buckets(n: int, bucket_size: int, rng_seed: int) -> list[list[int]]:
    """Bucketing, Karimireddy, He & Jaggi, ICLR 2022, Algorithm 1: a random permutation π
    of the n updates (seeded, so a run is reproducible) split into ⌈n/s⌉ buckets of s
    consecutive π entries (the last one smaller where s does not divide n)."""
    order = np.random.default_rng(rng_seed).permutation(n).tolist()
    return [order[k : k + bucket_size] for k in range(0, n, bucket_size)]


def bucket_means(
    models: Sequence[Model], weights: Sequence[float], groups: Sequence[Sequence[int]]
) -> tuple[list[list[np.ndarray]], list[float]]:
    """Each bucket's plain mean (Algorithm 1: y_i = mean of its updates; integer buffers
    rounded) and its weight, the sum of its members' weights (for Multi-Krum and the
    counters of centred clipping)."""
    means = [weighted_average([models[i] for i in g], [1.0] * len(g)) for g in groups]
    return means, [float(sum(weights[i] for i in g)) for g in groups]


def krum_scores(models: Sequence[Model], f: int) -> np.ndarray:
    """Krum's score of each model (Blanchard et al., 2017): the sum of squared distances
    to its n − f − 2 nearest others. Computed step by step as Flower's ``aggregate_krum``
    does (all arrays flattened together, its neighbour order), so that a selection made
    from these scores is the model Flower returns."""
    flat = np.array([np.concatenate(m, axis=None).ravel() for m in models])
    n = len(models)
    distances = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            distances[i, j] = np.linalg.norm(flat[i] - flat[j]) ** 2
    closest = max(1, n - f - 2)
    return np.array(
        [np.sum(distances[i, np.argsort(distances[i])[1 : closest + 1]]) for i in range(n)]
    )


def discarded_by_rank(models: Sequence[Model], cut: int) -> list[int]:
    """The models whose value is among the ``cut`` lowest or ``cut`` highest in more than
    half of the floating-point coordinates (what a coordinate-wise rule keeping the middle
    n − 2·cut values leaves out; ties by input order)."""
    n = len(models)
    if cut <= 0:
        return []
    dropped = np.zeros(n, dtype=np.int64)
    total = 0
    for i in _float_layers(models[0]):
        values = np.stack([m[i] for m in models]).reshape(n, -1)
        ranks = np.argsort(np.argsort(values, axis=0, kind="stable"), axis=0, kind="stable")
        dropped += np.sum((ranks < cut) | (ranks >= n - cut), axis=1)
        total += values.shape[1]
    return [k for k in range(n) if dropped[k] > total / 2]


def centered_clip(
    models: Sequence[Model],
    weights: Sequence[float],
    centre: Model,
    tau: float,
    iterations: int = 1,
) -> tuple[list[np.ndarray], list[int]]:
    """Centred clipping (CClip), Karimireddy, He & Jaggi, "Learning from History for
    Byzantine Robust Optimization", ICML 2021, §4 (the centred clipping rule, iterated):

        v_{l+1} = v_l + (1/n) Σ_i (x_i − v_l) · min(1, τ / ‖x_i − v_l‖),  l = 0 … L − 1,

    over the floating-point arrays flattened together. The paper starts from the previous
    aggregate (its momentum); with model averaging that is the current global model, so
    v_0 = ``centre``. Its weights are uniform 1/n, so the method's weights are ignored
    there; integer buffers (BatchNorm's counters) take the weighted mean, rounded, as
    :func:`fedimb.core.aggregate.weighted_average` gives them. Returns the model and the
    clients farther than τ from v_{L−1} (those whose weight the last iteration cut)."""
    floats, n = _float_layers(models[0]), len(models)
    v = [np.asarray(centre[i], dtype=np.float64) for i in floats]
    far: list[int] = []
    for _ in range(iterations):  # layer by layer: no n model-sized float64 copies
        norms = [
            math.sqrt(sum(float(np.sum((m[i] - c) ** 2)) for i, c in zip(floats, v)))
            for m in models
        ]
        scales = [1.0 if norm <= tau else tau / norm for norm in norms]
        far = [k for k, norm in enumerate(norms) if norm > tau]
        v = [c + sum(s * (m[i] - c) for s, m in zip(scales, models)) / n for i, c in zip(floats, v)]
    ints = [i for i in range(len(models[0])) if i not in floats]
    counters = weighted_average([[m[i] for i in ints] for m in models], weights) if ints else []
    out = dict(zip(floats, v)) | dict(zip(ints, counters))
    return [np.asarray(out[i]).astype(like.dtype) for i, like in enumerate(models[0])], far


def combine(
    updates_arrays: Sequence[Model],
    weights: Sequence[float],
    global_weights: Model | None,
    settings: RobustSettings,
    rng_seed: int | None = None,
) -> tuple[list[np.ndarray] | None, str | None]:
    """:func:`combine_recorded` without the set-aside clients."""
    new, reason, _ = combine_recorded(updates_arrays, weights, global_weights, settings, rng_seed)
    return new, reason


def combine_recorded(
    updates_arrays: Sequence[Model],
    weights: Sequence[float],
    global_weights: Model | None,
    settings: RobustSettings,
    rng_seed: int | None = None,
) -> tuple[list[np.ndarray] | None, str | None, list[int]]:
    """The new global weights from the client models under ``settings`` (or None and the
    one-line reason the round keeps the previous model), and the sorted indices into
    ``updates_arrays`` of the clients set aside (module docstring; none when the round
    keeps the model). ``weights`` are the method's aggregation weights; only ``mean`` and
    ``multikrum`` use them. ``rng_seed`` draws the buckets (needed with ``bucket_size``;
    the caller derives it from the run's seed and the round)."""
    arrays = [list(a) for a in updates_arrays]
    clipped: set[int] = set()
    if settings.max_update_norm is not None:
        if global_weights is None:
            raise ValueError("clipping updates needs the global weights")
        bound = float(settings.max_update_norm)
        clipped = {k for k, a in enumerate(arrays) if update_norm(a, global_weights) > bound}
        arrays = [clip_update(a, global_weights, bound) for a in arrays]
    if settings.name == "mean":
        return weighted_average(arrays, weights), None, sorted(clipped)
    need = minimum_updates(settings)
    if len(arrays) < need:
        return (
            None,
            (
                f"aggregation={settings.name} with {assumption(settings)} needs at least "
                f"{need} updates, got {len(arrays)}: global model unchanged"
            ),
            [],
        )
    groups = [[k] for k in range(len(arrays))]
    inputs, input_weights = arrays, list(weights)
    if settings.bucket_size is not None:
        if rng_seed is None:
            raise ValueError("bucketing needs rng_seed (derived from the run's seed and round)")
        groups = buckets(len(arrays), settings.bucket_size, rng_seed)
        inputs, input_weights = bucket_means(arrays, weights, groups)
    new, aside = _rule(inputs, input_weights, global_weights, settings)
    aside_clients = {k for g in aside for k in groups[g]}
    return new, None, sorted(aside_clients | clipped)


def _rule(
    models: list[list[np.ndarray]],
    weights: Sequence[float],
    global_weights: Model | None,
    settings: RobustSettings,
) -> tuple[list[np.ndarray], list[int]]:
    """The rule on its inputs (client models or bucket means): the new model, in the
    models' dtypes, and the inputs it set aside."""
    n, f = len(models), settings.attackers
    if settings.name == "centered_clip":
        if global_weights is None:
            raise ValueError("centred clipping needs the global weights")
        assert settings.tau is not None and settings.iterations is not None  # checked
        return centered_clip(models, weights, global_weights, settings.tau, settings.iterations)
    results = list(zip(models, normalised_weights(weights)))
    if settings.name == "median":
        new, aside = aggregate_median(results), discarded_by_rank(models, min(f, (n - 1) // 2))
    elif settings.name == "trimmed_mean":
        cut = f if settings.beta is None else int(settings.beta * n)
        new, aside = aggregate_trimmed_avg(results, _share(cut, n)), discarded_by_rank(models, cut)
    elif settings.name in ("krum", "multikrum"):
        scores = krum_scores(models, f)
        if settings.name == "krum":
            new, kept = aggregate_krum(results, num_malicious=f, to_keep=0), [np.argmin(scores)]
        else:  # Flower's Multi-Krum selection, to the order of ties
            new = aggregate_krum(results, num_malicious=f, to_keep=n - f)
            kept = list(np.argsort(scores)[::-1][f:])
        aside = sorted(set(range(n)) - {int(k) for k in kept})
    elif settings.name == "bulyan":  # Flower's Bulyan removes the models it selects from the list
        left = list(results)
        new = aggregate_bulyan(left, num_malicious=f, aggregation_rule=aggregate_krum, to_keep=0)
        aside = [k for k, r in enumerate(results) if any(r is x for x in left)]
    else:
        raise ValueError(f"unknown aggregation '{settings.name}'")
    return _in_model_dtypes(new, models[0]), aside


def _share(cut: int, n: int) -> float:
    """The proportion Flower's trimmed mean turns back into ``cut`` values per end
    (``int(share * n)``), safe from rounding below."""
    share = cut / n
    return share if int(share * n) == cut else float(np.nextafter(share, 1.0))


def _in_model_dtypes(layers: Sequence[np.ndarray], reference: Model) -> list[np.ndarray]:
    """Each layer in the dtype the clients' models have (integers rounded, as
    :func:`fedimb.core.aggregate.weighted_average` does)."""
    out = []
    for layer, like in zip(layers, reference, strict=True):
        layer = np.asarray(layer)
        if np.issubdtype(like.dtype, np.integer):
            out.append(np.rint(layer).astype(like.dtype))
        else:
            out.append(layer.astype(like.dtype, copy=False))
    return out
