"""Layer-wise weight shrinking (``shrink=fedlws``; FedLWS, Shi et al., ICLR 2025): every
layer of the new global model scaled by its own factor γ_l ≤ 1, computed on the server
from the previous global model and the round's client models alone (no proxy data).
Pure numpy, no Flower imports.

The paper reads the shrunk model γ·w^{t+1} as one step of weight decay: γ_l is chosen so
that the ratio τ_l of the decay's norm to the update's norm follows the spread of the
clients' updates. Every detail follows the authors' release, ``server_funct.py``
(function ``fedlws``) and ``args.py`` of github.com/ChanglongShi/FedLWS; where fedimb
differs (buffers, parameters after the last bias, a layer at zero) the Methods page says
why."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedimb.core.errors import check_number, require

Arrays = Sequence[np.ndarray]
OPTIONS = ("none", "fedlws")


@dataclass(frozen=True)
class ShrinkSettings:
    """``conf/shrink/fedlws.yaml``: τ_l = clip(beta · spread_l, min_tau, max_tau)."""

    beta: float
    min_tau: float
    max_tau: float

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> ShrinkSettings | None:
        """The settings of the ``shrink`` section, None for ``shrink=none``; a value out of
        range is a one-line :class:`ConfigError`."""
        name = section.get("name")
        require(name in OPTIONS, f"unknown shrink '{name}' (choose from: {', '.join(OPTIONS)})")
        if name == "none":
            return None
        settings = cls(section["beta"], section["min_tau"], section["max_tau"])
        check_number("shrink.beta", settings.beta, 0)
        check_number("shrink.min_tau", settings.min_tau, 0)
        check_number("shrink.max_tau", settings.max_tau, settings.min_tau)
        return settings


def layer_groups(names: Sequence[str], parameters: Iterable[str]) -> list[list[int]]:
    """The layers, as positions in ``names`` (a model's ``state_dict`` order), as the
    authors' code forms them: consecutive parameters, a layer ending at each one whose
    name contains ``bias`` (a convolution with its bias; one without a bias with the
    batch norm that follows it). Parameters after the last bias form one more layer.
    Buffers (batch-norm statistics and counter) are in no layer: they are not shrunk."""
    trainable = set(parameters)
    layers: list[list[int]] = []
    current: list[int] = []
    for i, name in enumerate(names):
        if name not in trainable:
            continue
        current.append(i)
        if "bias" in name:
            layers.append(current)
            current = []
    if current:
        layers.append(current)
    return layers


def _layer(arrays: Arrays, layer: Sequence[int]) -> np.ndarray:
    """One layer's arrays flattened into one float64 vector."""
    return np.concatenate([np.asarray(arrays[i], dtype=np.float64).ravel() for i in layer])


def shrinking_factors(
    previous: Arrays,
    aggregate: Arrays,
    clients: Sequence[Arrays],
    layers: Sequence[Sequence[int]],
    settings: ShrinkSettings,
) -> tuple[np.ndarray, np.ndarray]:
    """(γ_l, τ_l) per layer, with w_l the previous global model's layer, Δ_l the global
    update (the aggregate's layer − w_l) and Δ_k,l client k's (its model's layer − w_l):

        spread_l = (1/K) Σ_k ‖Δ_k,l − Δ̄_l‖₂,   Δ̄_l = (1/K) Σ_k Δ_k,l  (unweighted)
        τ_l = clip(β · spread_l, min_tau, max_tau)
        γ_l = ‖w_l‖₂ / (‖w_l‖₂ + τ_l · ‖Δ_l‖₂)

    τ_l is the ratio of the decay to the update; ‖·‖ over all arrays of the layer. A
    layer whose previous weights are all zero keeps γ_l = 1 (the formula gives 0 or 0/0)."""
    if not clients:
        raise ValueError("need at least one client model")
    gammas, taus = [], []
    for layer in layers:
        w = _layer(previous, layer)
        updates = np.stack([_layer(c, layer) - w for c in clients])
        spread = float(np.mean(np.linalg.norm(updates - updates.mean(axis=0), axis=1)))
        tau = float(np.clip(settings.beta * spread, settings.min_tau, settings.max_tau))
        norm = float(np.linalg.norm(w))
        step = float(np.linalg.norm(_layer(aggregate, layer) - w))
        gammas.append(norm / (norm + tau * step) if norm > 0 else 1.0)
        taus.append(tau)
    return np.array(gammas), np.array(taus)


def shrunk(aggregate: Arrays, layers: Sequence[Sequence[int]], gammas) -> list[np.ndarray]:
    """The aggregate with every array of layer l multiplied by γ_l (in its own dtype);
    arrays in no layer (buffers) unchanged."""
    out = [np.array(a, copy=True) for a in aggregate]
    for layer, gamma in zip(layers, gammas, strict=True):
        for i in layer:
            out[i] = (float(gamma) * np.asarray(aggregate[i], dtype=np.float64)).astype(
                aggregate[i].dtype
            )
    return out


def check_shape(previous: Arrays, clients: Sequence[Arrays], names: Sequence[str]) -> str | None:
    """Why the round's models cannot be shrunk layer by layer (None: they can)."""
    if len(names) != len(previous):
        return f"the global model has {len(previous)} arrays, its module {len(names)}"
    for arrays in clients:
        if len(arrays) != len(previous) or any(
            a.shape != b.shape for a, b in zip(arrays, previous)
        ):
            return "a client model's arrays differ from the global model's"
    return None
