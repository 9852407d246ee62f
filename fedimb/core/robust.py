"""Robust aggregation of client models (``aggregation=`` in the configuration).

The rules are Flower's own (:mod:`flwr.server.strategy.aggregate`); this module only
adapts their input (lists of ``(arrays, weight)`` pairs), clips updates, checks that a
round has enough updates for the rule, and gives every layer back its model dtype
(Flower's median and means return floats for integer buffers such as BatchNorm's
batch counter). ``mean`` is :func:`fedimb.core.aggregate.weighted_average` itself, so
runs with the default settings do not change by a bit.

- ``median``: coordinate-wise median (Yin et al., 2018); weights are ignored.
- ``trimmed_mean``: coordinate-wise mean after cutting ``int(beta * n)`` values at each
  end (Yin et al., 2018); weights are ignored.
- ``krum``: the one client model with the smallest sum of squared distances to its
  n − f − 2 nearest others (Blanchard et al., 2017).
- ``multikrum``: Multi-Krum of the same paper with m = n − f: the m models with the best
  Krum scores, averaged with the method's weights.
- ``bulyan``: El Mhamdi et al., 2018, with Krum as the selection rule: θ = n − 2f models
  chosen by repeated Krum, then per coordinate the mean of the β = θ − 2f values closest
  to their median.

Each rule's own assumption sets the fewest updates a round needs: Krum and Multi-Krum
n ≥ 2f + 3 (the paper's n > 2f + 2), Bulyan n ≥ 4f + 3. A round with fewer accepted
updates keeps the previous global model and says why (:func:`combine` returns None and
the reason); a smaller federation than that is refused with the configuration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.server.strategy.aggregate import (
    aggregate_bulyan,
    aggregate_krum,
    aggregate_median,
    aggregate_trimmed_avg,
)

from fedimb.core.aggregate import normalised_weights, weighted_average
from fedimb.core.errors import ConfigError

RULES = ("mean", "median", "trimmed_mean", "krum", "multikrum", "bulyan")


@dataclass(frozen=True)
class RobustSettings:
    """The ``aggregation`` section: the rule, f (assumed Byzantine clients, for Krum,
    Multi-Krum and Bulyan), beta (the trimmed mean's cut at each end) and the L2 bound
    on each client's update (None: no clipping)."""

    name: str = "mean"
    f: int = 0
    beta: float = 0.0
    max_update_norm: float | None = None

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None) -> RobustSettings:
        """Settings from the configuration's ``aggregation`` section (absent: plain mean)."""
        section = section or {}
        return cls(
            name=section.get("name", "mean"),
            f=section.get("f", 0),
            beta=section.get("beta", 0.0),
            max_update_norm=section.get("max_update_norm"),
        )

    @property
    def is_plain_mean(self) -> bool:
        """The method's own weighted mean, untouched (the default)."""
        return self.name == "mean" and self.max_update_norm is None


def check(settings: RobustSettings, num_clients: int) -> None:
    """One-line :class:`ConfigError` for the first setting out of range."""
    if settings.name not in RULES:
        raise ConfigError(
            f"unknown aggregation '{settings.name}' (choose from: {', '.join(RULES)})"
        )
    if not (isinstance(settings.f, int) and not isinstance(settings.f, bool) and settings.f >= 0):
        raise ConfigError(f"aggregation.f must be an integer >= 0, got {settings.f!r}")
    beta = settings.beta
    if not (isinstance(beta, (int, float)) and not isinstance(beta, bool) and 0 <= beta < 0.5):
        raise ConfigError(f"aggregation.beta must be in [0, 0.5), got {beta!r}")
    bound = settings.max_update_norm
    if bound is not None and not (
        isinstance(bound, (int, float))
        and not isinstance(bound, bool)
        and math.isfinite(bound)
        and bound > 0
    ):
        raise ConfigError(
            f"aggregation.max_update_norm must be a positive number or null, got {bound!r}"
        )
    need = minimum_updates(settings)
    if num_clients < need:
        raise ConfigError(
            f"aggregation={settings.name} with f={settings.f} "
            f"needs at least {need} updates a round, "
            f"but the federation has {num_clients} clients"
        )


def minimum_updates(settings: RobustSettings) -> int:
    """The fewest updates the rule's own assumption allows (module docstring)."""
    if settings.name in ("krum", "multikrum"):
        return 2 * settings.f + 3
    if settings.name == "bulyan":
        return 4 * settings.f + 3
    return 1


def clip_update(
    arrays: Sequence[np.ndarray], global_weights: Sequence[np.ndarray], max_norm: float
) -> list[np.ndarray]:
    """The client model whose update Δ = w − w_global has L2 norm at most ``max_norm``
    over all floating-point arrays (integer buffers are counters, not weights, and are
    kept). A model within the bound is returned unchanged, to the bit."""
    floats = [i for i, a in enumerate(arrays) if np.issubdtype(a.dtype, np.floating)]
    squared = sum(
        float(np.sum((arrays[i].astype(np.float64) - global_weights[i]) ** 2)) for i in floats
    )
    norm = math.sqrt(squared)
    if norm <= max_norm:
        return list(arrays)
    scale = max_norm / norm
    clipped = list(arrays)
    for i in floats:
        base = np.asarray(global_weights[i], dtype=np.float64)
        clipped[i] = (base + scale * (arrays[i].astype(np.float64) - base)).astype(arrays[i].dtype)
    return clipped


def combine(
    updates_arrays: Sequence[Sequence[np.ndarray]],
    weights: Sequence[float],
    global_weights: Sequence[np.ndarray] | None,
    settings: RobustSettings,
) -> tuple[list[np.ndarray] | None, str | None]:
    """The new global weights from the client models under ``settings``, or None and the
    one-line reason the round keeps the previous model. ``weights`` are the method's
    aggregation weights; only ``mean`` and ``multikrum`` use them."""
    arrays = [list(a) for a in updates_arrays]
    if settings.max_update_norm is not None:
        if global_weights is None:
            raise ValueError("clipping updates needs the global weights")
        arrays = [clip_update(a, global_weights, float(settings.max_update_norm)) for a in arrays]
    if settings.name == "mean":
        return weighted_average(arrays, weights), None
    need = minimum_updates(settings)
    if len(arrays) < need:
        return None, (
            f"aggregation={settings.name} with f={settings.f} needs at least {need} updates, "
            f"got {len(arrays)}: global model unchanged"
        )
    results = list(zip(arrays, normalised_weights(weights)))
    return _in_model_dtypes(_flower_rule(results, settings), arrays[0]), None


def _flower_rule(results: list, settings: RobustSettings) -> list[np.ndarray]:
    f = int(settings.f)
    if settings.name == "median":
        return aggregate_median(results)
    if settings.name == "trimmed_mean":
        return aggregate_trimmed_avg(results, proportiontocut=float(settings.beta))
    if settings.name == "krum":
        return aggregate_krum(results, num_malicious=f, to_keep=0)
    if settings.name == "multikrum":
        return aggregate_krum(results, num_malicious=f, to_keep=len(results) - f)
    if settings.name == "bulyan":  # Flower's Bulyan removes the models it selects from the list
        return aggregate_bulyan(
            list(results), num_malicious=f, aggregation_rule=aggregate_krum, to_keep=0
        )
    raise ValueError(f"unknown aggregation '{settings.name}'")


def _in_model_dtypes(
    layers: Sequence[np.ndarray], reference: Sequence[np.ndarray]
) -> list[np.ndarray]:
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
